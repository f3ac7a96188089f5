// mimalloc rather than glibc's malloc: loading a config root is mostly
// small allocations on several threads, where it took a quarter of `plan`'s
// instructions (docs/BENCHMARKS.md, section 1).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(bootstrap::run(std::env::args_os()));
}
