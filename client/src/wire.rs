//! The model's kinds, operations and grants in the contract's terms. The model names each
//! kind's `ObjectKind` in its table of kinds; here it becomes the generated value.

use nauthera_proto::v1::{self, ObjectKind};
use nauthera_shared::grants::{GrantEntry, Operation};
use nauthera_shared::kinds::Kind;

/// A kind as the AdminService names it.
pub trait KindWire {
    /// The kind's `ObjectKind`.
    fn object_kind(self) -> ObjectKind;
}

impl KindWire for Kind {
    fn object_kind(self) -> ObjectKind {
        // The table's names are checked against the contract below, so the fallback is never
        // taken.
        ObjectKind::from_str_name(self.object_kind_name()).unwrap_or(ObjectKind::Unspecified)
    }
}

/// The kind of an AdminService object; `None` for an unspecified one.
pub fn kind_of(object_kind: ObjectKind) -> Option<Kind> {
    Kind::ALL
        .into_iter()
        .find(|kind| kind.object_kind() == object_kind)
}

/// The operation as the AdminService contract spells it.
pub fn operation(operation: Operation) -> v1::Operation {
    match operation {
        Operation::Clients => v1::Operation::Clients,
        Operation::Brandings => v1::Operation::Brandings,
        Operation::IdentityProviders => v1::Operation::IdentityProviders,
        Operation::Organizations => v1::Operation::Organizations,
    }
}

/// The operation of a contract value; `None` for `OPERATION_UNSPECIFIED` or an unknown number.
pub fn operation_of(value: i32) -> Option<Operation> {
    match v1::Operation::try_from(value).ok()? {
        v1::Operation::Clients => Some(Operation::Clients),
        v1::Operation::Brandings => Some(Operation::Brandings),
        v1::Operation::IdentityProviders => Some(Operation::IdentityProviders),
        v1::Operation::Organizations => Some(Operation::Organizations),
        v1::Operation::Unspecified => None,
    }
}

/// The entry as the AdminService reports it in `ServerInfo.grants`.
pub fn grant(entry: &GrantEntry) -> v1::Grant {
    v1::Grant {
        identity: entry.identity.clone(),
        operations: entry
            .operations
            .iter()
            .map(|op| operation(*op) as i32)
            .collect(),
        organizations: entry.organizations.clone(),
        namespaces: entry.namespaces.clone(),
    }
}

/// The entry of a reported grant; unknown operations are dropped.
pub fn grant_entry(grant: &v1::Grant) -> GrantEntry {
    GrantEntry {
        identity: grant.identity.clone(),
        operations: grant
            .operations
            .iter()
            .filter_map(|value| operation_of(*value))
            .collect(),
        organizations: grant.organizations.clone(),
        namespaces: grant.namespaces.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_names_an_object_kind_of_the_contract() {
        for kind in Kind::ALL {
            assert_ne!(kind.object_kind(), ObjectKind::Unspecified, "{kind}");
            assert_eq!(kind_of(kind.object_kind()), Some(kind));
        }
        assert_eq!(kind_of(ObjectKind::Unspecified), None);
    }

    #[test]
    fn operations_go_both_ways() {
        for op in Operation::ALL {
            assert_eq!(operation_of(operation(op) as i32), Some(op));
        }
        assert_eq!(operation_of(0), None);
        assert_eq!(operation_of(99), None);
    }

    #[test]
    fn entries_round_trip_through_the_contract() {
        let entry = GrantEntry {
            identity: "spiffe://cluster.local/ns/nauthera/sa/reconciler".into(),
            operations: vec![Operation::Clients, Operation::Brandings],
            organizations: vec!["acme".into()],
            namespaces: vec!["*".into()],
        };
        assert_eq!(grant_entry(&grant(&entry)), entry);
    }
}
