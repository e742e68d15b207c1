//! Named budgets: every wait in this module is bounded by one, and running out of it names
//! the budget, the cell and the last kernel state seen.

use std::borrow::Cow;
use std::time::Duration;

/// A named limit on a wait, e.g. `Budget::new("cell (--cell-budget)", 60 s)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// The name messages use.
    pub name: Cow<'static, str>,
    /// The limit.
    pub limit: Duration,
}

impl Budget {
    /// A budget called `name`.
    pub fn new(name: impl Into<Cow<'static, str>>, limit: Duration) -> Self {
        Budget {
            name: name.into(),
            limit,
        }
    }
}
