//! State fixtures: put an association in a state, feed chunks as
//! representations, assert exactly what it emits.

mod fixtures;
