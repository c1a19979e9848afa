//! [`Readiness`]: what `/readyz` answers. The server is ready when it leads (holds the Lease, or
//! runs without leader election), every controller's watch has delivered its first list and is
//! not failing, and shutdown has not begun; otherwise `/readyz` says that the server is stopping,
//! that it follows (and who leads), or which watch is not there yet or is down.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The state of one watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WatchState {
    /// The first list has not arrived yet.
    Starting,
    /// Listed and watching.
    Up,
    /// The last attempt failed; the watch starts again after a backoff.
    Down,
}

/// Whether this server runs the controllers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum Role {
    /// It holds the Lease, or runs without leader election.
    #[default]
    Leading,
    /// Another server holds the Lease (`None`: the holder is not known yet).
    Following(Option<String>),
}

#[derive(Debug, Default)]
struct State {
    watches: BTreeMap<&'static str, WatchState>,
    role: Role,
    stopping: bool,
}

/// Shared readiness of the server; cheap to clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct Readiness {
    state: Arc<Mutex<State>>,
}

impl Readiness {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Registers the watch `name` (not ready until it reports [`Watch::up`]).
    pub(crate) fn watch(&self, name: &'static str) -> Watch {
        self.with(|s| s.watches.insert(name, WatchState::Starting));
        Watch {
            readiness: self.clone(),
            name,
        }
    }

    /// The server waits for the Lease, which `holder` holds (`None`: not known yet).
    pub(crate) fn following(&self, holder: Option<&str>) {
        self.with(|s| s.role = Role::Following(holder.map(str::to_owned)));
    }

    /// The server holds the Lease: ready once its watches are.
    pub(crate) fn leading(&self) {
        self.with(|s| s.role = Role::Leading);
    }

    /// Shutdown has begun: never ready again.
    pub(crate) fn stopping(&self) {
        self.with(|s| s.stopping = true);
    }

    /// `Ok` when ready; otherwise why not, in words.
    pub(crate) fn check(&self) -> Result<(), String> {
        self.with(|s| {
            if s.stopping {
                return Err("stopping: the server is shutting down".to_owned());
            }
            match &s.role {
                Role::Leading => {}
                Role::Following(Some(holder)) => return Err(format!("follower: {holder} leads")),
                Role::Following(None) => {
                    return Err("follower: waiting for the Lease".to_owned());
                }
            }
            let not_up: Vec<String> = s
                .watches
                .iter()
                .filter(|(_, state)| **state != WatchState::Up)
                .map(|(name, state)| match state {
                    WatchState::Down => format!("the {name} watch is down"),
                    _ => format!("the {name} watch has not listed yet"),
                })
                .collect();
            if s.watches.is_empty() {
                Err("starting: no controller runs yet".to_owned())
            } else if not_up.is_empty() {
                Ok(())
            } else {
                Err(not_up.join("; "))
            }
        })
    }
}

/// The handle one controller reports its watch's state through.
#[derive(Debug, Clone)]
pub(crate) struct Watch {
    readiness: Readiness,
    name: &'static str,
}

impl Watch {
    /// A handle for a controller whose state `/readyz` does not wait for: it reports to a
    /// readiness of its own that nothing reads.
    pub(crate) fn unwatched(name: &'static str) -> Self {
        Self {
            readiness: Readiness::default(),
            name,
        }
    }

    /// The watch listed or delivered an event.
    pub(crate) fn up(&self) {
        self.set(WatchState::Up);
    }

    /// The watch failed.
    pub(crate) fn down(&self) {
        self.set(WatchState::Down);
    }

    fn set(&self, state: WatchState) {
        self.readiness.with(|s| s.watches.insert(self.name, state));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_while_every_watch_is_up_and_not_after_shutdown() {
        let readiness = Readiness::default();
        assert!(readiness.check().is_err(), "nothing registered yet");
        let backups = readiness.watch("backups");
        let restores = readiness.watch("restores");
        assert_eq!(
            readiness.check(),
            Err(
                "the backups watch has not listed yet; the restores watch has not listed yet"
                    .to_owned()
            )
        );
        backups.up();
        restores.up();
        assert_eq!(readiness.check(), Ok(()));
        restores.down();
        assert_eq!(
            readiness.check(),
            Err("the restores watch is down".to_owned())
        );
        restores.up();
        assert_eq!(readiness.check(), Ok(()));
        readiness.stopping();
        assert!(
            readiness
                .check()
                .is_err_and(|why| why.starts_with("stopping"))
        );
    }

    #[test]
    fn a_follower_is_not_ready_and_names_the_leader() {
        let readiness = Readiness::default();
        readiness.watch("backups").up();
        readiness.following(None);
        assert_eq!(
            readiness.check(),
            Err("follower: waiting for the Lease".to_owned())
        );
        readiness.following(Some("hawser-1"));
        assert_eq!(
            readiness.check(),
            Err("follower: hawser-1 leads".to_owned())
        );
        readiness.leading();
        assert_eq!(readiness.check(), Ok(()));
        readiness.following(Some("hawser-2"));
        readiness.stopping();
        assert!(
            readiness
                .check()
                .is_err_and(|why| why.starts_with("stopping"))
        );
    }
}
