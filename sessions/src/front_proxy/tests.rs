use axum::{
    Extension, Router,
    body::Body,
    http::{HeaderValue, Request},
    routing::get,
};
use tower::ServiceExt;

use super::*;

/// A CA the verifier accepts (any self-signed CA will do: these tests never handshake).
fn ca_pem() -> String {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().pem()
}

fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn kubeadm_config() -> FrontProxyConfig {
    let ca = ca_pem();
    FrontProxyConfig::from_config_map(&data(&[
        ("client-ca-file", "ignored"),
        ("requestheader-client-ca-file", &ca),
        ("requestheader-allowed-names", r#"["front-proxy-client"]"#),
        ("requestheader-username-headers", r#"["X-Remote-User"]"#),
        ("requestheader-group-headers", r#"["X-Remote-Group"]"#),
        (
            "requestheader-extra-headers-prefix",
            r#"["X-Remote-Extra-"]"#,
        ),
    ]))
    .unwrap()
}

#[test]
fn the_config_map_is_parsed_as_the_apiserver_publishes_it() {
    let config = kubeadm_config();
    assert_eq!(config.allowed_names, ["front-proxy-client"]);
    assert_eq!(config.username_headers, ["X-Remote-User"]);
    assert_eq!(config.group_headers, ["X-Remote-Group"]);
    assert_eq!(config.extra_headers_prefixes, ["X-Remote-Extra-"]);

    let ca = ca_pem();
    // No CA: aggregation is not configured.
    let error = FrontProxyConfig::from_config_map(&data(&[(
        "requestheader-username-headers",
        r#"["X-Remote-User"]"#,
    )]))
    .unwrap_err();
    assert!(
        error.to_string().contains("requestheader-client-ca-file"),
        "{error}"
    );
    // A list that is not a JSON array.
    let error = FrontProxyConfig::from_config_map(&data(&[
        ("requestheader-client-ca-file", &ca),
        ("requestheader-username-headers", "X-Remote-User"),
    ]))
    .unwrap_err();
    assert!(
        error.to_string().contains("requestheader-username-headers"),
        "{error}"
    );
    // A CA that is not one.
    assert!(
        FrontProxyConfig::from_config_map(&data(&[
            ("requestheader-client-ca-file", "not a pem"),
            ("requestheader-username-headers", r#"["X-Remote-User"]"#),
        ]))
        .is_err()
    );
    // Missing lists are empty: any name the CA signed.
    let open = FrontProxyConfig::from_config_map(&data(&[
        ("requestheader-client-ca-file", &ca),
        ("requestheader-username-headers", r#"["X-Remote-User"]"#),
    ]))
    .unwrap();
    assert!(open.allowed_names.is_empty() && open.group_headers.is_empty());
}

#[test]
fn identity_comes_from_the_configured_headers_only() {
    let config = kubeadm_config();
    let mut headers = HeaderMap::new();
    headers.insert("x-remote-user", HeaderValue::from_static("alice"));
    headers.append("x-remote-group", HeaderValue::from_static("devs"));
    headers.append(
        "x-remote-group",
        HeaderValue::from_static("system:authenticated"),
    );
    headers.append("x-remote-extra-Scopes", HeaderValue::from_static("a"));
    headers.append("x-remote-extra-scopes", HeaderValue::from_static("b"));
    headers.append(
        "x-remote-extra-example.com%2fteam",
        HeaderValue::from_static("blue"),
    );
    // Not configured: never read.
    headers.insert("impersonate-user", HeaderValue::from_static("admin"));
    headers.insert("x-forwarded-user", HeaderValue::from_static("admin"));
    let identity = config.identity(&headers).unwrap();
    assert_eq!(identity.user, "alice");
    assert_eq!(identity.groups, ["devs", "system:authenticated"]);
    assert_eq!(
        identity.extra,
        BTreeMap::from([
            ("example.com/team".to_string(), vec!["blue".to_string()]),
            ("scopes".to_string(), vec!["a".to_string(), "b".to_string()]),
        ])
    );

    // Other header names, when the apiserver is configured with them.
    let custom = FrontProxyConfig {
        username_headers: vec!["X-Empty".into(), "X-Who".into()],
        group_headers: vec!["X-Teams".into()],
        extra_headers_prefixes: vec!["X-Also-".into()],
        ..config.clone()
    };
    headers.insert("x-empty", HeaderValue::from_static(""));
    headers.insert("x-who", HeaderValue::from_static("bob"));
    let identity = custom.identity(&headers).unwrap();
    assert_eq!(identity.user, "bob");
    assert!(identity.groups.is_empty() && identity.extra.is_empty());

    // No user header: no identity.
    assert_eq!(config.identity(&HeaderMap::new()), None);
}

fn app(front_proxy: Arc<FrontProxy>) -> Router {
    let whoami = Router::new().route(
        "/whoami",
        get(|Extension(identity): Extension<Identity>| async move { identity.user }),
    );
    crate::server::app(front_proxy, whoami)
}

fn verified(cn: &str) -> Caller {
    Caller::Verified {
        common_name: Some(cn.into()),
        dns_names: Vec::new(),
    }
}

async fn call(app: Router, path: &str, caller: Option<Caller>) -> (u16, String) {
    let mut request = Request::get(path)
        .header("x-remote-user", "admin")
        .body(Body::empty())
        .unwrap();
    if let Some(caller) = caller {
        request.extensions_mut().insert(caller);
    }
    let response = app.oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test]
async fn only_the_apiserver_is_answered_and_refusals_are_counted() {
    let refusals = Refusals::default();
    let front_proxy = FrontProxy::new(kubeadm_config(), refusals.clone()).unwrap();
    let count = |reason| refusals.get_or_create(&RefusedLabels { reason }).get();
    let whoami = "/apis/sessions.wizardofoz.co/v1alpha1/whoami";
    let discovery = "/apis/sessions.wizardofoz.co/v1alpha1";

    // Forged headers without a certificate: refused, headers never read.
    let (status, body) = call(app(front_proxy.clone()), whoami, None).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains(r#""kind":"Status""#), "{body}");
    assert_eq!(count(NO_CERTIFICATE), 1);
    // Discovery needs the certificate too.
    assert_eq!(call(app(front_proxy.clone()), discovery, None).await.0, 401);
    // A certificate from the CA with a name not allowed.
    let (status, _) = call(app(front_proxy.clone()), whoami, Some(verified("mallory"))).await;
    assert_eq!(status, 403);
    assert_eq!(count(NAME_NOT_ALLOWED), 1);
    // The apiserver.
    let apiserver = Some(verified("front-proxy-client"));
    assert_eq!(
        call(app(front_proxy.clone()), whoami, apiserver.clone()).await,
        (200, "admin".into())
    );
    let (status, body) = call(app(front_proxy.clone()), discovery, apiserver.clone()).await;
    assert_eq!(status, 200);
    assert!(body.contains("APIResourceList"), "{body}");
    assert_eq!(
        call(app(front_proxy.clone()), "/openapi/v2", apiserver)
            .await
            .0,
        404
    );
    assert_eq!(count(NO_CERTIFICATE), 2);

    // The allowed name as a DNS SAN, under another CN: not the apiserver (it checks CNs).
    let dns_only = Caller::Verified {
        common_name: Some("some-other-client".into()),
        dns_names: vec!["front-proxy-client".into()],
    };
    let (status, _) = call(app(front_proxy.clone()), whoami, Some(dns_only)).await;
    assert_eq!(status, 403);
    assert_eq!(count(NAME_NOT_ALLOWED), 2);

    // The allowed names follow the ConfigMap.
    front_proxy
        .update(FrontProxyConfig {
            allowed_names: vec!["mallory".into()],
            ..kubeadm_config()
        })
        .unwrap();
    assert_eq!(
        call(app(front_proxy.clone()), whoami, Some(verified("mallory")))
            .await
            .0,
        200
    );
}

#[tokio::test]
async fn a_session_route_without_a_user_is_refused() {
    let refusals = Refusals::default();
    let front_proxy = FrontProxy::new(kubeadm_config(), refusals.clone()).unwrap();
    let mut request = Request::get("/apis/sessions.wizardofoz.co/v1alpha1/whoami")
        .body(Body::empty())
        .unwrap();
    request
        .extensions_mut()
        .insert(verified("front-proxy-client"));
    let response = app(front_proxy).oneshot(request).await.unwrap();
    assert_eq!(response.status().as_u16(), 401);
    assert_eq!(
        refusals
            .get_or_create(&RefusedLabels { reason: NO_USER })
            .get(),
        1
    );
}
