//! What the verbs reason over, with nothing read from the cluster: a resource of any kind as one
//! plain view ([`view`]), and the judgements over plain values that more than one verb makes:
//! whether the grant the server reported covers a resource ([`grant_check`]), the
//! ClientPolicies' verdicts ([`policies`]) and how many resources drifted and why ([`drift`]).

pub mod drift;
pub mod grant_check;
pub mod policies;
pub mod view;
