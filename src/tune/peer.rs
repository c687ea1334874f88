//! Tuning the peer: the request a controller sends and the agent's answer,
//! validated on receipt, and the agent's policy (`--allow-tuning`).
//!
//! A request carries a profile as TOML text, never as pre-resolved keys: the
//! agent parses it with the same parser as a local file (so the sysctl
//! allow-list, name checks and size bounds hold for the network too) and
//! resolves it on its own host, where `@route` means the interface that
//! routes back to the controller. Reading (save, plan, status) is always
//! allowed: the agent already reports its facts. Changing (apply, rollback,
//! finish) needs the agent's owner to have started it with
//! `--allow-tuning`; otherwise the answer is [`TuneResponse::Refused`] with
//! [`refusal`]'s text and nothing changes.
//!
//! [`serve`] is the whole agent side; the control-protocol glue only moves
//! these two types and runs `serve` on a blocking thread.

use super::apply::{self, ApplyOptions, ApplyReport, Pending, RollbackReport};
use super::error::TuneError;
use super::host::Host;
use super::profile::MAX_TEXT;
use super::profile::{check_interface_name, check_profile_name, NameError, Profile, ProfileError};
use super::resolve::{Plan, Problem, ResolveOpts};
use super::snapshot::snapshot;
use super::state::StateDir;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// Most interfaces a save request may name.
pub const MAX_IFACES: usize = 64;

/// A request the agent does not act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// A profile or interface name no profile may hold.
    #[error(transparent)]
    Name(#[from] NameError),
    /// More interfaces than a save names.
    #[error("{0} interfaces; at most {MAX_IFACES}")]
    TooManyIfaces(usize),
    /// A profile larger than any file may be.
    #[error("profile of {0} bytes; at most {MAX_TEXT}")]
    TooLarge(usize),
    /// The profile is wrong.
    #[error(transparent)]
    Profile(#[from] ProfileError),
}

/// What the controller asks the agent's host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum TuneRequest {
    /// `profile save --peer`: the agent host's current values.
    Save {
        /// Name of the profile to write.
        name: String,
        /// Interfaces (empty: every one but lo).
        ifaces: Vec<String>,
    },
    /// `profile apply --peer --dry-run` and the confirmation screen: resolve only.
    Plan {
        /// Profile text.
        profile: String,
        /// Drop settings the host does not have.
        skip_unsupported: bool,
    },
    /// `profile apply --peer`.
    Apply {
        /// Profile text.
        profile: String,
        /// Drop settings the host does not have.
        skip_unsupported: bool,
    },
    /// `profile rollback --peer`.
    Rollback,
    /// `profile finish --peer`.
    Finish,
    /// Is an interrupted apply pending there?
    Status,
}

/// The agent's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum TuneResponse {
    /// A saved profile.
    Saved {
        /// Profile text.
        profile: String,
        /// What was left out.
        notes: Vec<String>,
    },
    /// A resolved plan (dry run).
    Planned {
        /// The plan.
        plan: Plan,
        /// Settings skipped as unsupported.
        skipped: Vec<Problem>,
    },
    /// Applied (or finished).
    Applied(ApplyReport),
    /// Rolled back.
    RolledBack(RollbackReport),
    /// Status.
    Status {
        /// The interrupted apply, if any.
        pending: Option<Pending>,
    },
    /// Not allowed here.
    Refused {
        /// Why, and how to allow it.
        reason: String,
    },
    /// It failed (the message names the setting and the kernel's error).
    Failed {
        /// The error.
        error: String,
    },
}

impl TuneRequest {
    /// Check a request received from the network before acting on it.
    pub fn validate(&self) -> Result<(), RequestError> {
        match self {
            TuneRequest::Save { name, ifaces } => {
                check_profile_name(name)?;
                if ifaces.len() > MAX_IFACES {
                    return Err(RequestError::TooManyIfaces(ifaces.len()));
                }
                for i in ifaces {
                    check_interface_name(i)?;
                }
                Ok(())
            }
            TuneRequest::Plan { profile, .. } | TuneRequest::Apply { profile, .. } => {
                if profile.len() > MAX_TEXT {
                    return Err(RequestError::TooLarge(profile.len()));
                }
                Profile::parse(profile, "profile from the controller")?;
                Ok(())
            }
            TuneRequest::Rollback | TuneRequest::Finish | TuneRequest::Status => Ok(()),
        }
    }

    /// Does it change the host (and so need `--allow-tuning`)?
    pub fn changes_host(&self) -> bool {
        matches!(
            self,
            TuneRequest::Apply { .. } | TuneRequest::Rollback | TuneRequest::Finish
        )
    }
}

/// What an agent without `--allow-tuning` answers.
pub fn refusal(host: &str) -> String {
    format!(
        "the agent on {host} does not allow tuning, so nothing was changed there. \
         Its owner can allow it by restarting it with `wirescope agent --allow-tuning`; \
         changes are then backed up under its state directory and can be undone with \
         `wirescope profile rollback --peer`"
    )
}

/// The agent's side: validate, check the policy, act on `host`.
/// `controller` is the controller's address (what `@route` resolves towards).
pub fn serve(
    req: &TuneRequest,
    allow_tuning: bool,
    host: &Host,
    state: &StateDir,
    controller: Option<IpAddr>,
) -> TuneResponse {
    if let Err(e) = req.validate() {
        return TuneResponse::Failed {
            error: format!("invalid request: {e}"),
        };
    }
    if req.changes_host() && !allow_tuning {
        let name = crate::probe::system::HostInfo::current().hostname;
        return TuneResponse::Refused {
            reason: refusal(&name),
        };
    }
    let opts = ResolveOpts {
        route_to: controller,
        subject: None,
    };
    let parse = |text: &str| Profile::parse(text, "profile from the controller");
    let answer = || -> Result<TuneResponse, TuneError> {
        Ok(match req {
            TuneRequest::Save { name, ifaces } => {
                let s = snapshot(host, name, ifaces)?;
                TuneResponse::Saved {
                    profile: s.text,
                    notes: s.notes,
                }
            }
            TuneRequest::Plan {
                profile,
                skip_unsupported,
            } => {
                let mut plan = super::resolve::resolve(&parse(profile)?, host, &opts);
                let skipped = if *skip_unsupported {
                    plan.skip_unsupported()
                } else {
                    Vec::new()
                };
                TuneResponse::Planned { plan, skipped }
            }
            TuneRequest::Apply {
                profile,
                skip_unsupported,
            } => {
                let aopts = ApplyOptions {
                    skip_unsupported: *skip_unsupported,
                    after_step: None,
                };
                TuneResponse::Applied(apply::apply(&parse(profile)?, host, state, &opts, &aopts)?)
            }
            TuneRequest::Rollback => TuneResponse::RolledBack(apply::rollback(host, state)?),
            TuneRequest::Finish => {
                TuneResponse::Applied(apply::finish(host, state, &ApplyOptions::default())?)
            }
            TuneRequest::Status => TuneResponse::Status {
                pending: apply::pending(state)?,
            },
        })
    };
    answer().unwrap_or_else(|e| TuneResponse::Failed {
        error: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_are_checked() {
        let r = TuneRequest::Apply {
            profile: "name = \"x\"\n[sysctl]\n\"net.ipv4.tcp_rmem\" = \"4096 131072 6291456\"\n"
                .into(),
            skip_unsupported: false,
        };
        let j = serde_json::to_string(&r).unwrap();
        assert!(j.starts_with("{\"op\":\"apply\""), "{j}");
        assert_eq!(serde_json::from_str::<TuneRequest>(&j).unwrap(), r);
        r.validate().unwrap();
        assert!(r.changes_host());
        let bad = TuneRequest::Apply {
            profile: "name = \"x\"\n[sysctl]\n\"kernel.core_pattern\" = \"|/tmp/x\"\n".into(),
            skip_unsupported: false,
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("only net.*"));
        let bad = TuneRequest::Save {
            name: "x".into(),
            ifaces: vec!["../../etc".into()],
        };
        assert!(bad.validate().is_err());
        assert!(!TuneRequest::Status.changes_host());
    }

    #[test]
    fn an_agent_without_allow_tuning_refuses_and_says_how() {
        let d = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let host = Host::at_root(root.path());
        let state = StateDir::at(d.path());
        for req in [TuneRequest::Rollback, TuneRequest::Finish] {
            match serve(&req, false, &host, &state, None) {
                TuneResponse::Refused { reason } => {
                    assert!(
                        reason.contains("--allow-tuning") && reason.contains("nothing was changed"),
                        "{reason}"
                    )
                }
                other => panic!("{other:?}"),
            }
        }
        // Nothing was written to the state directory either.
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
        assert!(matches!(
            serve(&TuneRequest::Status, false, &host, &state, None),
            TuneResponse::Status { pending: None }
        ));
    }
}
