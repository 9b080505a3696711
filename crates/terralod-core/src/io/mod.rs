//! Loaders and writers for elevation formats (feature H2).
