//! How a check came out, the one vocabulary of the runbook's checks (`diagnose KIND/NAME`), the
//! manifest checks (`diagnose -f`) and the policy findings they share.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CheckStatus {
    Passed,
    Warning,
    Failed,
    /// Facts shown, nothing to judge.
    Info,
    /// The plugin cannot run it; the command is for a person.
    Manual,
}

impl CheckStatus {
    pub fn needs_attention(self) -> bool {
        matches!(self, CheckStatus::Warning | CheckStatus::Failed)
    }
}
