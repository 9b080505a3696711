//! Queries a game or viewer needs (feature H8): height at any point, ray casts.
