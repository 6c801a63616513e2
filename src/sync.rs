//! The atomics, locks and cells that threads hand work over with, chosen by
//! one type parameter (a [`Kit`]).
//!
//! The hand-offs between threads (`actors::cell`, `actors::port`,
//! `websocket::handle`, `runtime::wakeup`) take their primitives from a kit
//! rather than from `std` directly. The server instantiates them with
//! [`Std`], whose methods are the standard library's own, inlined: it runs
//! the same code it would run without the kit. The models (`crate::model`)
//! instantiate the very same code with loom's primitives, which explore its
//! interleavings and weak-memory outcomes.

use std::cell::UnsafeCell;
use std::fmt::Debug;
use std::ops::DerefMut;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Where a hand-off's primitives come from.
pub(crate) trait Kit: 'static {
    type Bool: Atomic<bool>;
    type U8: AtomicInt<u8>;
    type Usize: AtomicInt<usize>;
    type U64: Atomic<u64>;
    type Mutex<T: Send>: Lock<T>;
    type Cell<T: Send>: Exclusive<T>;
}

/// The standard library's primitives: what the server runs on.
#[derive(Debug)]
pub(crate) struct Std;

impl Kit for Std {
    type Bool = AtomicBool;
    type U8 = AtomicU8;
    type Usize = AtomicUsize;
    type U64 = AtomicU64;
    type Mutex<T: Send> = Mutex<T>;
    type Cell<T: Send> = UnsafeCell<T>;
}

/// An atomic value, with the methods the hand-offs use.
pub(crate) trait Atomic<V>: Send + Sync + Debug {
    fn new(value: V) -> Self;
    fn load(&self, order: Ordering) -> V;
    fn store(&self, value: V, order: Ordering);
    fn swap(&self, value: V, order: Ordering) -> V;
    fn compare_exchange(
        &self,
        current: V,
        new: V,
        success: Ordering,
        failure: Ordering,
    ) -> Result<V, V>;
}

/// An atomic integer.
pub(crate) trait AtomicInt<V>: Atomic<V> {
    fn fetch_add(&self, value: V, order: Ordering) -> V;
    fn fetch_sub(&self, value: V, order: Ordering) -> V;
    fn fetch_or(&self, value: V, order: Ordering) -> V;
    fn fetch_and(&self, value: V, order: Ordering) -> V;
}

/// A mutex. Locking never fails: the hand-offs keep their data whole at
/// every step, so a lock poisoned by a panic elsewhere is taken all the same.
pub(crate) trait Lock<T>: Send + Sync {
    type Guard<'a>: DerefMut<Target = T>
    where
        Self: 'a;
    fn new(value: T) -> Self;
    fn lock(&self) -> Self::Guard<'_>;
}

/// A cell whose value one thread at a time may change, by the rules of the
/// type that holds it.
pub(crate) trait Exclusive<T>: Send {
    fn new(value: T) -> Self;
    /// Runs `f` with the value.
    ///
    /// # Safety
    ///
    /// No other call of `with_mut` on this cell runs meanwhile.
    unsafe fn with_mut<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
}

/// Implements [`Atomic`] for std's atomic `$atomic` of `$value`.
macro_rules! std_atomic {
    ($atomic:ty, $value:ty) => {
        impl Atomic<$value> for $atomic {
            #[inline]
            fn new(value: $value) -> Self {
                <$atomic>::new(value)
            }
            #[inline]
            fn load(&self, order: Ordering) -> $value {
                <$atomic>::load(self, order)
            }
            #[inline]
            fn store(&self, value: $value, order: Ordering) {
                <$atomic>::store(self, value, order)
            }
            #[inline]
            fn swap(&self, value: $value, order: Ordering) -> $value {
                <$atomic>::swap(self, value, order)
            }
            #[inline]
            fn compare_exchange(
                &self,
                current: $value,
                new: $value,
                success: Ordering,
                failure: Ordering,
            ) -> Result<$value, $value> {
                <$atomic>::compare_exchange(self, current, new, success, failure)
            }
        }
    };
}

/// Implements [`AtomicInt`] (and [`Atomic`]) for std's atomic `$atomic`.
macro_rules! std_atomic_int {
    ($atomic:ty, $value:ty) => {
        std_atomic!($atomic, $value);

        impl AtomicInt<$value> for $atomic {
            #[inline]
            fn fetch_add(&self, value: $value, order: Ordering) -> $value {
                <$atomic>::fetch_add(self, value, order)
            }
            #[inline]
            fn fetch_sub(&self, value: $value, order: Ordering) -> $value {
                <$atomic>::fetch_sub(self, value, order)
            }
            #[inline]
            fn fetch_or(&self, value: $value, order: Ordering) -> $value {
                <$atomic>::fetch_or(self, value, order)
            }
            #[inline]
            fn fetch_and(&self, value: $value, order: Ordering) -> $value {
                <$atomic>::fetch_and(self, value, order)
            }
        }
    };
}

std_atomic!(AtomicBool, bool);
std_atomic!(AtomicU64, u64);
std_atomic_int!(AtomicU8, u8);
std_atomic_int!(AtomicUsize, usize);

impl<T: Send> Lock<T> for Mutex<T> {
    type Guard<'a>
        = MutexGuard<'a, T>
    where
        T: 'a;

    #[inline]
    fn new(value: T) -> Self {
        Mutex::new(value)
    }

    #[inline]
    fn lock(&self) -> MutexGuard<'_, T> {
        Mutex::lock(self).unwrap_or_else(|e| e.into_inner())
    }
}

impl<T: Send> Exclusive<T> for UnsafeCell<T> {
    #[inline]
    fn new(value: T) -> Self {
        UnsafeCell::new(value)
    }

    #[inline]
    unsafe fn with_mut<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: the caller's promise: nothing else reaches the value now.
        f(unsafe { &mut *self.get() })
    }
}
