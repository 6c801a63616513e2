//! The one place the dispatch mode is decided: `--dispatch` picks how the
//! server hosts its connection actors, and everything else asks the chosen
//! [`Hosting`] (and the `ConnectionSet` and `ConnectionMode` it hands out)
//! what to do, as hyper picks a role once as a type.
//!
//! - `local` (the default, `local_dispatch`): each poller owns its
//!   connection actors and runs them itself, through an `AnySender` of its
//!   own; a request never crosses uppercut's scheduler.
//! - `system` (`system_dispatch`, for comparison): every connection actor is
//!   spawned into the uppercut system and every wake goes through its one
//!   scheduler thread.

use crate::config::Dispatch;
use crate::runtime::connections::Hosting;
use crate::runtime::local_dispatch::LocalHosting;
use crate::runtime::system_dispatch::SystemHosting;

/// How a server started with `dispatch` hosts its connection actors.
pub(crate) fn hosting(dispatch: Dispatch) -> &'static dyn Hosting {
    match dispatch {
        Dispatch::Local => &LocalHosting,
        Dispatch::System => &SystemHosting,
    }
}
