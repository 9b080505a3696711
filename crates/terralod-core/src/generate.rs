//! Procedural terrain (feature H3): the built-in terrain when no file is given.
