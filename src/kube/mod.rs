pub mod diagnose;
pub mod ready;
pub mod wait;
