//! A link this build does not check yet (DNS, Gateway and HTTP(S): issue 31 links 5-7). It is
//! `not-applicable` and says so: a link with nothing checked is never `ok`.

use cluster_loop::error::Result;
use futures::future::BoxFuture;

use super::{Context, Link};
use crate::chain::LinkReport;

/// A link not checked by this build.
pub struct Unchecked {
    /// Its place in the chain.
    pub position: u8,
    /// Its id.
    pub id: &'static str,
    /// What it would check, for the summary.
    pub what: &'static str,
}

impl Link for Unchecked {
    fn position(&self) -> u8 {
        self.position
    }

    fn id(&self) -> &'static str {
        self.id
    }

    fn check<'a>(&'a self, _cx: &'a Context<'a>) -> BoxFuture<'a, Result<LinkReport>> {
        Box::pin(async move {
            Ok(LinkReport::not_applicable(
                self.position,
                self.id,
                format!("not checked: this build does not check {} yet", self.what),
            ))
        })
    }
}
