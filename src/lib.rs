pub mod flux;
pub fn run<I: IntoIterator<Item = std::ffi::OsString>>(_args: I) -> i32 { 0 }
