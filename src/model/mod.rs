//! Models of the hand-offs between threads, checked with loom.
//!
//! Each model runs the production code of one hand-off (instantiated with
//! the [`Loom`] kit instead of `sync::Std`) on two or three threads, and
//! loom runs it under every interleaving of their atomic operations and
//! locks, and every value a load may read under the memory model, up to a
//! bound on preemptions. A model asserts the claim its hand-off makes (no
//! message lost, no wake-up lost, one holder at a time, order kept); a
//! thread blocked for ever (a lost wake-up) shows as a deadlock, and one
//! that spins for ever as a run past loom's branch limit.
//!
//! What loom cannot see: code that uses std's primitives directly (they
//! are not modelled), and interleavings past the preemption bound.

mod cell;
mod mailbag;
mod mailbox;
mod port;

use std::marker::PhantomData;
use std::sync::atomic::Ordering::{self, SeqCst};

use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, AtomicUsize};

use crate::sync::{Atomic, AtomicInt, Exclusive, Kit, Lock};

/// Loom's primitives, with `SeqCst` made good by fences placed as `F` says.
pub(crate) struct Loom<F: Fences>(PhantomData<F>);

impl<F: Fences> Kit for Loom<F> {
    type Bool = Sc<AtomicBool, F>;
    type U8 = Sc<AtomicU8, F>;
    type Usize = Sc<AtomicUsize, F>;
    type U64 = Sc<AtomicU64, F>;
    type Mutex<T: Send> = loom::sync::Mutex<T>;
    type Cell<T: Send> = loom::cell::UnsafeCell<T>;
}

/// A loom atomic whose `SeqCst` operations keep their promise.
///
/// Loom treats a `SeqCst` load, store or read-modify-write as `AcqRel`:
/// two threads that each store to one atomic and then load the other may
/// both read the old values, which `SeqCst` forbids, and the hand-offs here
/// rely on exactly that (the cell letting go, the parked flag). Loom does
/// model `SeqCst` fences, so each `SeqCst` operation gets one, as a
/// compiler maps `SeqCst` accesses onto hardware with weaker ones: either
/// before every `SeqCst` operation ([`Leading`]), or after every `SeqCst`
/// store and read-modify-write ([`Trailing`], the x86 mapping). Either one
/// is a correct mapping, so correct code passes under both; each is a
/// little stronger than `SeqCst` itself where a `SeqCst` operation meets a
/// weaker one, so the models run under both: an access weakened from
/// `SeqCst` on either side of a hand-off fails under one of them.
///
/// And each store is made as a swap whose old value is dropped. Loom can
/// order a plain store between the read and the write of another thread's
/// read-modify-write, which no machine does (tokio-rs/loom#254): a port's
/// `pending` flag, set by a poster while its poller swaps it back, would
/// then lose the poster's store for good after a join. A swap is ordered
/// after whatever it read, as a store is on a machine. What the swap adds
/// beyond that (it continues the release sequence of the store it read)
/// ties together only writes to one atomic by different threads, which no
/// hand-off here relies on being apart.
#[derive(Debug)]
pub(crate) struct Sc<A, F>(A, PhantomData<F>);

/// Where `Sc` puts its fences.
pub(crate) trait Fences: Send + Sync + std::fmt::Debug + 'static {
    /// Before each `SeqCst` operation, rather than after each `SeqCst`
    /// store or read-modify-write.
    const LEADING: bool;
}

/// A fence before each `SeqCst` operation.
#[derive(Debug)]
pub(crate) struct Leading;

impl Fences for Leading {
    const LEADING: bool = true;
}

/// A fence after each `SeqCst` store and read-modify-write.
#[derive(Debug)]
pub(crate) struct Trailing;

impl Fences for Trailing {
    const LEADING: bool = false;
}

/// Runs a `SeqCst`-or-weaker operation `op` that `writes` or not, fenced
/// as `F` says when it is `SeqCst`.
fn fenced<F: Fences, R>(seq_cst: bool, writes: bool, op: impl FnOnce() -> R) -> R {
    if seq_cst && F::LEADING {
        fence(SeqCst);
    }
    let result = op();
    if seq_cst && writes && !F::LEADING {
        fence(SeqCst);
    }
    result
}

/// Implements the kit's atomic traits for `Sc` of loom's `$atomic`.
macro_rules! loom_atomic {
    ($atomic:ty, $value:ty) => {
        impl<F: Fences> Atomic<$value> for Sc<$atomic, F> {
            fn new(value: $value) -> Self {
                Sc(<$atomic>::new(value), PhantomData)
            }
            fn load(&self, order: Ordering) -> $value {
                fenced::<F, _>(order == SeqCst, false, || self.0.load(order))
            }
            fn store(&self, value: $value, order: Ordering) {
                // A swap whose old value is dropped (see `Sc`).
                fenced::<F, _>(order == SeqCst, true, || {
                    self.0.swap(value, order);
                })
            }
            fn swap(&self, value: $value, order: Ordering) -> $value {
                fenced::<F, _>(order == SeqCst, true, || self.0.swap(value, order))
            }
            fn compare_exchange(
                &self,
                current: $value,
                new: $value,
                success: Ordering,
                failure: Ordering,
            ) -> Result<$value, $value> {
                // A failed exchange is a load: no fence after it.
                let seq_cst = success == SeqCst;
                let exchanged = fenced::<F, _>(seq_cst, false, || {
                    self.0.compare_exchange(current, new, success, failure)
                });
                if seq_cst && exchanged.is_ok() && !F::LEADING {
                    fence(SeqCst);
                }
                exchanged
            }
        }
    };
}

/// As `loom_atomic`, with the integer operations.
macro_rules! loom_atomic_int {
    ($atomic:ty, $value:ty) => {
        loom_atomic!($atomic, $value);

        impl<F: Fences> AtomicInt<$value> for Sc<$atomic, F> {
            fn fetch_add(&self, value: $value, order: Ordering) -> $value {
                fenced::<F, _>(order == SeqCst, true, || self.0.fetch_add(value, order))
            }
            fn fetch_sub(&self, value: $value, order: Ordering) -> $value {
                fenced::<F, _>(order == SeqCst, true, || self.0.fetch_sub(value, order))
            }
            fn fetch_or(&self, value: $value, order: Ordering) -> $value {
                fenced::<F, _>(order == SeqCst, true, || self.0.fetch_or(value, order))
            }
            fn fetch_and(&self, value: $value, order: Ordering) -> $value {
                fenced::<F, _>(order == SeqCst, true, || self.0.fetch_and(value, order))
            }
        }
    };
}

loom_atomic!(AtomicBool, bool);
loom_atomic!(AtomicU64, u64);
loom_atomic_int!(AtomicU8, u8);
loom_atomic_int!(AtomicUsize, usize);

impl<T: Send> Lock<T> for loom::sync::Mutex<T> {
    type Guard<'a>
        = loom::sync::MutexGuard<'a, T>
    where
        T: 'a;

    fn new(value: T) -> Self {
        loom::sync::Mutex::new(value)
    }

    fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        loom::sync::Mutex::lock(self).unwrap_or_else(|e| e.into_inner())
    }
}

impl<T: Send> Exclusive<T> for loom::cell::UnsafeCell<T> {
    fn new(value: T) -> Self {
        loom::cell::UnsafeCell::new(value)
    }

    unsafe fn with_mut<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: the caller's promise; loom checks it, and fails the model
        // when two accesses are not ordered one after the other.
        loom::cell::UnsafeCell::with_mut(self, |value| f(unsafe { &mut *value }))
    }
}

/// Runs `model` under loom with at most `preemptions` preemptions per
/// execution (loom's `LOOM_MAX_PREEMPTIONS` overrides it), and says how
/// many executions it explored (seen with `--nocapture`).
fn check(preemptions: usize, mapping: &str, model: fn()) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(preemptions);
    }
    let executions = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&executions);
    builder.check(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        model();
    });
    let executions = executions.load(std::sync::atomic::Ordering::Relaxed);
    let bound = builder.preemption_bound.unwrap_or_default();
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("model");
    eprintln!("{name} ({mapping}): {executions} executions, at most {bound} preemptions");
}

/// Runs the model `$model::<F>` under both fence mappings (see `Sc`).
macro_rules! check_both {
    ($preemptions:expr, $model:ident) => {{
        $crate::model::check($preemptions, "leading", $model::<$crate::model::Leading>);
        $crate::model::check($preemptions, "trailing", $model::<$crate::model::Trailing>);
    }};
}
use check_both;

/// Two threads each store to one flag, then load the other.
fn store_buffering<F: Fences>() {
    use std::sync::Arc;
    let flags = Arc::new((
        <Sc<AtomicBool, F> as Atomic<bool>>::new(false),
        <Sc<AtomicBool, F> as Atomic<bool>>::new(false),
    ));
    let other = Arc::clone(&flags);
    let seen = loom::thread::spawn(move || {
        other.0.store(true, SeqCst);
        other.1.load(SeqCst)
    });
    flags.1.store(true, SeqCst);
    let seen_here = flags.0.load(SeqCst);
    let seen_there = seen.join().expect("the thread ran");
    assert!(seen_here || seen_there, "both missed the other's store");
}

/// The store-buffering shape that the cell and the parked flag rely on:
/// with `Sc`'s fences, one side sees the other.
#[test]
fn seq_cst_store_then_load_sees_the_other_side() {
    check_both!(3, store_buffering);
}

/// Without them, loom lets both sides miss: why `Sc` exists. Should a
/// later loom model `SeqCst` accesses, this fails, and the fences can go.
#[test]
#[should_panic(expected = "both missed")]
fn loom_alone_treats_seq_cst_as_acq_rel() {
    check(3, "none", || {
        use std::sync::Arc;
        let flags = Arc::new((AtomicBool::new(false), AtomicBool::new(false)));
        let other = Arc::clone(&flags);
        let seen = loom::thread::spawn(move || {
            other.0.store(true, SeqCst);
            other.1.load(SeqCst)
        });
        flags.1.store(true, SeqCst);
        let seen_here = flags.0.load(SeqCst);
        let seen_there = seen.join().expect("the thread ran");
        assert!(seen_here || seen_there, "both missed the other's store");
    });
}
