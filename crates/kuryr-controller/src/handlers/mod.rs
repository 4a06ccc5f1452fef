//! The controller's handlers, one module per watched kind (upstream's `enabled_handlers`).

pub mod pod;
