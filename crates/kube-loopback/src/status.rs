//! API errors, rendered as the `Status` objects a real API server returns so
//! that clients classify them the way they would in production.

use serde_json::{Value, json};

use super::resources::ResourceType;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn about(mut self, rt: &ResourceType, name: &str) -> Self {
        self.details = Some(json!({"name": name, "group": rt.group, "kind": rt.plural}));
        self
    }

    pub fn not_found(rt: &ResourceType, name: &str) -> Self {
        let msg = format!("{} \"{name}\" not found", rt.qualified());
        Self::new(404, "NotFound", msg).about(rt, name)
    }

    pub fn already_exists(rt: &ResourceType, name: &str) -> Self {
        let msg = format!("{} \"{name}\" already exists", rt.qualified());
        Self::new(409, "AlreadyExists", msg).about(rt, name)
    }

    pub fn conflict(rt: &ResourceType, name: &str) -> Self {
        let msg = format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
             please apply your changes to the latest version and try again",
            rt.qualified()
        );
        Self::new(409, "Conflict", msg).about(rt, name)
    }

    pub fn invalid(rt: &ResourceType, name: &str, why: &str) -> Self {
        let msg = format!("{} \"{name}\" is invalid: {why}", rt.kind);
        Self::new(422, "Invalid", msg).about(rt, name)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn no_such_resource() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    pub fn unsupported_media_type(content_type: &str, accepted: &str) -> Self {
        let msg = format!(
            "the body of the request was in an unknown format - accepted media types include: {accepted}; got {content_type:?}"
        );
        Self::new(415, "UnsupportedMediaType", msg)
    }

    /// What kube-apiserver answers when no media type of the request's
    /// Accept header can be served (`errNotAcceptable`).
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// An error injected by a test: the reason matches what a real server
    /// sends with that code, so retry classification behaves as in production.
    pub fn injected(code: u16) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            409 => "Conflict",
            410 => "Expired",
            422 => "Invalid",
            429 => "TooManyRequests",
            500 => "InternalError",
            504 => "Timeout",
            _ => "ServiceUnavailable",
        };
        Self::new(code, reason, format!("injected failure ({code} {reason})"))
    }

    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}
