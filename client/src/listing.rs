//! Walking the listings of whole objects (`ListClients`, `ListBrandings`,
//! `ListIdentityProviders`, `ListOrganizations`) page by page, and what an older server that
//! answers `Unimplemented` means to the caller.

use nauthera_proto::v1;
use nauthera_shared::kinds::Kind;
use tonic::Code;

use crate::{AdminClient, CallError};

/// The feature word `ServerInfo.features` holds when the server offers the listings.
pub const LIST_OBJECTS_FEATURE: &str = "list_objects";

/// Why a listing could not be walked.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    /// The server answered `Unimplemented`: it is older than the listings.
    #[error(
        "the server at {address} does not offer {method} (feature `{feature}`): it is older than \
         the export; upgrade nauthera-server to a version that lists objects"
    )]
    ServerTooOld {
        address: String,
        method: &'static str,
        feature: &'static str,
    },
    /// Any other failure of a call, as the client reports it.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The server handed out the same page token twice; walking on would never end.
    #[error("the server at {address} repeated the page token of {method}; the listing was stopped")]
    RepeatedPageToken {
        address: String,
        method: &'static str,
    },
}

/// One kind's listing: its method, how a page is asked for and what a page holds.
pub trait Listing: Sized + Send {
    /// The kind listed, whose row names the method.
    const KIND: Kind;
    type Page: Send;

    fn call(
        client: &AdminClient,
        request: v1::ListObjectsRequest,
    ) -> impl Future<Output = Result<Self::Page, CallError>> + Send;

    /// The objects of a page and the token of the next one (empty after the last).
    fn split(page: Self::Page) -> (Vec<Self>, String);
}

macro_rules! listings {
    ($($message:ty: $kind:expr, $call:ident, $page:ty, $field:ident;)*) => {
        $(impl Listing for $message {
            const KIND: Kind = $kind;
            type Page = $page;

            async fn call(
                client: &AdminClient,
                request: v1::ListObjectsRequest,
            ) -> Result<$page, CallError> {
                client.$call(request).await
            }

            fn split(page: $page) -> (Vec<Self>, String) {
                (page.$field, page.next_page_token)
            }
        })*
    };
}

listings! {
    v1::Client: Kind::OidcClient, list_clients, v1::ListClientsResponse, clients;
    v1::Branding: Kind::Branding, list_brandings, v1::ListBrandingsResponse, brandings;
    v1::IdentityProvider: Kind::IdentityProvider, list_identity_providers,
        v1::ListIdentityProvidersResponse, identity_providers;
    v1::Organization: Kind::Organization, list_organizations,
        v1::ListOrganizationsResponse, organizations;
}

/// Every object of kind `T` the filters of `request` select, walking all pages (its
/// `page_token` is where the walk starts).
pub async fn list_all<T: Listing>(
    client: &AdminClient,
    mut request: v1::ListObjectsRequest,
) -> Result<Vec<T>, ListError> {
    let method = T::KIND.methods().list;
    let mut objects = Vec::new();
    loop {
        let page = T::call(client, request.clone())
            .await
            .map_err(|error| too_old(error, client.address(), method))?;
        let (mut listed, next) = T::split(page);
        objects.append(&mut listed);
        if next.is_empty() {
            return Ok(objects);
        }
        if next == request.page_token {
            return Err(ListError::RepeatedPageToken {
                address: client.address().to_owned(),
                method,
            });
        }
        request.page_token = next;
    }
}

/// An `Unimplemented` answer as the older server it means; any other error as it is.
fn too_old(error: CallError, address: &str, method: &'static str) -> ListError {
    match &error {
        CallError::Server(server) if server.code == Code::Unimplemented => {
            ListError::ServerTooOld {
                address: address.to_owned(),
                method,
                feature: LIST_OBJECTS_FEATURE,
            }
        }
        _ => ListError::Call(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ServerError;

    #[test]
    fn an_unimplemented_listing_says_the_server_is_older() {
        let status = tonic::Status::unimplemented("ListClients is not implemented");
        let error = too_old(
            CallError::Server(ServerError::from_status(&status)),
            "server:8443",
            "ListClients",
        );
        let message = error.to_string();
        assert!(matches!(error, ListError::ServerTooOld { .. }), "{message}");
        assert!(message.contains("older"), "{message}");
        assert!(message.contains("list_objects"), "{message}");
        assert!(message.contains("ListClients"), "{message}");
    }

    #[test]
    fn other_errors_are_kept() {
        let status = tonic::Status::permission_denied("no");
        let error = too_old(
            CallError::Server(ServerError::from_status(&status)),
            "server:8443",
            "ListClients",
        );
        assert!(matches!(error, ListError::Call(_)));
    }
}
