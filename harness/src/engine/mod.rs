//! The engine: what drives the stages for each command. The gate plans a matrix, runs it,
//! classifies and judges every run and cell and hands the cells to the reports; repro runs
//! one cell until it fails; doctor checks the host and the scenarios; bundle packs vkexit
//! for another machine.

pub mod bundle;
pub mod doctor;
pub mod elf;
pub mod gate;
pub mod repro;
