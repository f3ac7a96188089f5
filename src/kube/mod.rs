pub mod diagnose;
pub mod ready;
pub mod wait;
pub mod apply;
pub mod client;
pub mod ledger;
pub mod lock;
pub mod retry;
