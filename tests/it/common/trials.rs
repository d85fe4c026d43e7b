//! A test's independent trials side by side: each trial on a key or prefix
//! of its own, asserting what it asserted when the trials ran one after
//! another. Most of a trial's time is waiting (on processes, TTLs, fences),
//! so a test of ten 7-second trials need not take 70 s.

use std::future::Future;

/// Runs `trial(i)` for every `i` in `0..n`, `at_once` at a time, each on a
/// thread of its own. The first trial that panicked fails the caller with
/// its own panic, once the trials of its batch have ended.
pub fn side_by_side(n: usize, at_once: usize, trial: impl Fn(usize) + Sync) {
    let all: Vec<usize> = (0..n).collect();
    for batch in all.chunks(at_once.max(1)) {
        let failed = std::thread::scope(|s| {
            let running: Vec<_> = batch
                .iter()
                .map(|&i| {
                    let trial = &trial;
                    s.spawn(move || trial(i))
                })
                .collect();
            running.into_iter().find_map(|h| h.join().err())
        });
        if let Some(panic) = failed {
            std::panic::resume_unwind(panic);
        }
    }
}

/// [`side_by_side`] for trials that are futures, from a test on a
/// multi-thread runtime: each trial is driven by that runtime on a thread of
/// its own, so a trial that blocks (waiting for a process) holds up no other.
pub fn side_by_side_async<F: Future<Output = ()>>(
    n: usize,
    at_once: usize,
    trial: impl Fn(usize) -> F + Sync,
) {
    let rt = tokio::runtime::Handle::current();
    tokio::task::block_in_place(|| side_by_side(n, at_once, |i| rt.block_on(trial(i))));
}
