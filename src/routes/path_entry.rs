//! One path's routes: what answers each method there, and the 405 that
//! lists them in `Allow`.

use crate::http::method::Method;
use crate::http::response::CannedResponse;

/// What answers one method at one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Canned(usize),
    Handler(usize),
    Actor(usize),
    /// A WebSocket route (GET only), by index into its factories.
    WebSocket(usize),
}

/// One path's routes, by method (in `Method::ROUTABLE` order).
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The path as declared (`/users/{id}`, `/static/*`): the route's name
    /// in the metrics.
    pub(crate) path: Box<str>,
    pub(crate) targets: [Option<Target>; Method::ROUTABLE.len()],
    /// The 405 whose `Allow` lists the methods above.
    pub(crate) not_allowed: CannedResponse,
}

impl Entry {
    pub(crate) fn target(&self, method: Method) -> Option<Target> {
        let slot = Method::ROUTABLE.iter().position(|&m| m == method)?;
        self.targets[slot]
    }

    /// The `Allow` value: every method with a target, and HEAD with GET.
    pub(crate) fn allow(&self) -> String {
        let allowed = |slot: usize, method: Method| {
            self.targets[slot].is_some()
                || (method == Method::Head && self.target(Method::Get).is_some())
        };
        let names: Vec<&str> = Method::ROUTABLE
            .iter()
            .enumerate()
            .filter(|&(slot, &method)| allowed(slot, method))
            .map(|(_, method)| method.as_str())
            .collect();
        names.join(", ")
    }
}
