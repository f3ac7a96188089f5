//! Loading's work spread over the machine's cores: the release files are
//! parsed, and a cluster's releases rendered, on scoped threads, each
//! thread taking one contiguous run of the items so the results come back in
//! the items' order (problems are reported in file order, as one thread
//! would report them).

use std::num::NonZeroUsize;

/// Below this many items one thread does it: spawning costs more than it saves.
const MIN_PER_THREAD: usize = 8;

/// `f` applied to every item of `items`, in order, on up to as many threads
/// as the machine has cores.
pub(super) fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    let threads = cores.min(items.len() / MIN_PER_THREAD).max(1);
    if threads == 1 {
        return items.iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .skip(1)
            .map(|run| scope.spawn(move || run.iter().map(f).collect::<Vec<R>>()))
            .collect();
        // The first run on this thread while the others work.
        let mut out: Vec<R> = items[..chunk.min(items.len())].iter().map(f).collect();
        for handle in handles {
            match handle.join() {
                Ok(mut more) => out.append(&mut more),
                // A panic on a worker is a panic of loading: pass it on.
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_order_of_the_items() {
        for n in [0, 1, 7, 8, 16, 17, 100, 1001] {
            let items: Vec<usize> = (0..n).collect();
            let out = map(&items, |i| i * 2);
            assert_eq!(
                out,
                items.iter().map(|i| i * 2).collect::<Vec<_>>(),
                "{n} items"
            );
        }
    }
}
