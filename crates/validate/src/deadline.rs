//! The review deadline (pure, per thread): takes a deadline for the validation run on this thread ([`run_until`]),
//! answers whether it has passed ([`expired`]). Rules check it between routes, hosts, patches and patterns and
//! stop early once it has passed, and [`super::validate_object`] then records one error saying so (only when a rule
//! did stop, [`take_cut_short`]), so no review
//! keeps a core busy after its time is up. Without a deadline nothing ever expires (the CLI, the watch loop).

use std::cell::Cell;
use std::time::Instant;

thread_local! {
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// Whether a rule found the deadline passed (and stopped) since [`take_cut_short`] was last called.
    static CUT_SHORT: Cell<bool> = const { Cell::new(false) };
}

/// Runs `work` with validation on this thread stopping at `deadline`; the previous deadline is restored after.
pub fn run_until<T>(deadline: Instant, work: impl FnOnce() -> T) -> T {
    struct Restore(Option<Instant>);
    impl Drop for Restore {
        fn drop(&mut self) {
            DEADLINE.with(|d| d.set(self.0));
        }
    }
    let _restore = Restore(DEADLINE.with(|d| d.replace(Some(deadline))));
    work()
}

/// Whether this thread's validation deadline has passed; a rule that gets `true` stops, and that is remembered for
/// [`take_cut_short`].
pub fn expired() -> bool {
    let expired = DEADLINE
        .with(Cell::get)
        .is_some_and(|at| Instant::now() >= at);
    if expired {
        CUT_SHORT.with(|cut| cut.set(true));
    }
    expired
}

/// Whether some rule stopped early because of the deadline since the last call; clears it.
pub fn take_cut_short() -> bool {
    CUT_SHORT.with(|cut| cut.replace(false))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn expires_only_inside_a_passed_deadline() {
        assert!(!expired());
        run_until(Instant::now(), || assert!(expired()));
        assert!(take_cut_short());
        assert!(!take_cut_short(), "cleared");
        run_until(Instant::now() + Duration::from_secs(60), || {
            assert!(!expired());
            run_until(Instant::now(), || assert!(expired()));
            assert!(!expired(), "the outer deadline is back");
        });
        assert!(!expired());
    }
}
