fn main() {
    std::process::exit(bootstrap::run(std::env::args_os()));
}
