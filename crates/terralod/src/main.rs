//! `terralod`: the command-line tool.

fn main() {}
