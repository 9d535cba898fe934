//! The pages of one listing, and what to do when a page request fails.

/// Where a paged listing stands: whether a page was read yet, and the expired continue tokens
/// met since the last page.
#[derive(Debug, Default)]
pub(super) struct Paging {
    pages: u32,
    pub expirations: u32,
    expired_in_a_row: u32,
}

/// What a paged listing does after a page request failed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum AfterFailure {
    /// The first page's 404: the kind is not installed.
    NotInstalled,
    /// The continue token outlasted the server's history (410 Expired); the server's answer
    /// carries a token for the rest of the listing, read as it stands now.
    GoOnFrom(String),
    Fail,
}

/// Expired tokens in a row, with no page read between them, before the listing gives up: a
/// server whose history is shorter than one page's round trip.
const EXPIRED_IN_A_ROW: u32 = 3;

impl Paging {
    pub fn page_read(&mut self) {
        self.pages += 1;
        self.expired_in_a_row = 0;
    }

    /// Starting over with one unpaged request (client-go's pager does) would hold the whole
    /// listing in memory at once; the server's own token for the rest keeps one page at a time
    /// and never repeats a resource, at the price the server names: the rest is read at a later
    /// revision.
    pub fn after_failure(&mut self, error: &kube::Error) -> AfterFailure {
        let kube::Error::Api(status) = error else {
            return AfterFailure::Fail;
        };
        match status.code {
            404 if self.pages == 0 => AfterFailure::NotInstalled,
            410 if self.pages > 0 && self.expired_in_a_row < EXPIRED_IN_A_ROW => {
                let token = status
                    .metadata
                    .as_ref()
                    .and_then(|list| list.continue_.clone())
                    .filter(|token| !token.is_empty());
                match token {
                    Some(token) => {
                        self.expirations += 1;
                        self.expired_in_a_row += 1;
                        AfterFailure::GoOnFrom(token)
                    }
                    None => AfterFailure::Fail,
                }
            }
            _ => AfterFailure::Fail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;

    fn api_error(code: u16, token: Option<&str>) -> kube::Error {
        let mut status = kube::core::Status::failure("refused", "Reason").with_code(code);
        status.metadata = token.map(|token| ListMeta {
            continue_: Some(token.to_owned()),
            ..ListMeta::default()
        });
        kube::Error::Api(status.boxed())
    }

    #[test]
    fn a_404_before_any_page_means_the_kind_is_not_installed() {
        let mut paging = Paging::default();
        assert_eq!(
            paging.after_failure(&api_error(404, None)),
            AfterFailure::NotInstalled
        );
        paging.page_read();
        assert_eq!(
            paging.after_failure(&api_error(404, None)),
            AfterFailure::Fail
        );
    }

    #[test]
    fn an_expired_token_goes_on_with_the_token_the_server_gives() {
        let mut paging = Paging::default();
        paging.page_read();
        assert_eq!(
            paging.after_failure(&api_error(410, Some("rest"))),
            AfterFailure::GoOnFrom("rest".to_owned())
        );
        assert_eq!(paging.expirations, 1);
        // Without a token for the rest there is nothing to go on from.
        assert_eq!(
            paging.after_failure(&api_error(410, None)),
            AfterFailure::Fail
        );
        assert_eq!(
            paging.after_failure(&api_error(410, Some(""))),
            AfterFailure::Fail
        );
    }

    #[test]
    fn expired_tokens_with_no_page_between_them_give_up() {
        let mut paging = Paging::default();
        paging.page_read();
        for _ in 0..EXPIRED_IN_A_ROW {
            assert!(matches!(
                paging.after_failure(&api_error(410, Some("rest"))),
                AfterFailure::GoOnFrom(_)
            ));
        }
        assert_eq!(
            paging.after_failure(&api_error(410, Some("rest"))),
            AfterFailure::Fail
        );
        // A page read in between starts the count again.
        paging.page_read();
        assert!(matches!(
            paging.after_failure(&api_error(410, Some("rest"))),
            AfterFailure::GoOnFrom(_)
        ));
        assert_eq!(paging.expirations, EXPIRED_IN_A_ROW + 1);
    }

    #[test]
    fn other_failures_fail() {
        let mut paging = Paging::default();
        assert_eq!(
            paging.after_failure(&api_error(410, Some("rest"))),
            AfterFailure::Fail
        );
        assert_eq!(
            paging.after_failure(&api_error(500, None)),
            AfterFailure::Fail
        );
        assert_eq!(
            paging.after_failure(&kube::Error::LinesCodecMaxLineLengthExceeded),
            AfterFailure::Fail
        );
    }
}
