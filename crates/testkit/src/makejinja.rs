//! makejinja (the templating onedr0p/cluster-template renders its
//! repository with) for the corpus tests, with the template's delimiters
//! (`#% %#` blocks, `#{ }#` expressions, whole-line blocks removed as its
//! `trim_blocks`/`lstrip_blocks` do) and one configuration stated here: the
//! defaults of its cluster.sample.toml, with example addresses, and
//! placeholders for the secrets its plugin reads from files (age key,
//! deploy key, webhook token). A block or expression not in these tables
//! fails the test rather than being guessed.

use std::collections::BTreeMap;
use std::path::Path;

/// One template's text, rendered.
pub fn render(text: &str) -> String {
    let conditions: BTreeMap<&str, bool> = [
        ("spegel.enabled", true),
        (
            "dns.provider == 'cloudflare' and ingress.mode != 'none'",
            true,
        ),
        ("cilium_bgp_enabled", false),
        ("repository.url.startswith('ssh://')", false),
        ("repository.webhook_provider != 'none'", true),
        ("dns.provider == 'cloudflare'", true),
        ("ingress.mode != 'none'", true),
        ("ingress.mode == 'cloudflare-tunnel'", true),
    ]
    .into();
    let expressions: BTreeMap<&str, &str> = [
        ("2 if controller_count > 1 else 1", "1"),
        ("2 if nodes | length > 1 else 1", "1"),
        ("cilium.loadbalancer_mode", "dsr"),
        ("kubernetes.coredns_addr", "10.43.0.10"),
        ("kubernetes.pod_cidr", "10.42.0.0/16"),
        ("repository.branch", "main"),
        ("repository.url", "https://github.com/example/home-ops"),
        ("repository.webhook_provider", "github"),
        ("repository.known_hosts", "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"),
        ("network.node_cidr", "192.168.1.0/24"),
        ("gateways.internal", "192.168.1.11"),
        ("gateways.external", "192.168.1.12"),
        ("dns.token", "placeholder-cloudflare-api-token"),
        ("cluster_issuer", "letsencrypt-production"),
        ("'external' if ingress.mode != 'none' else 'internal'", "external"),
        ("webhook_token()", "placeholder-webhook-token"),
        ("deploy_key()", "placeholder-deploy-key"),
        ("age_key('private')", "AGE-SECRET-KEY-PLACEHOLDER"),
    ]
    .into();
    let mut out = String::new();
    let mut stack: Vec<(bool, bool)> = Vec::new(); // (taking, any branch taken)
    // `filter indent(width=N, first=False)`: where its output starts, and N.
    let mut filter: Option<(usize, usize)> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(block) = trimmed
            .strip_prefix("#%")
            .and_then(|t| t.strip_suffix("%#"))
        {
            let block = block.trim();
            let outer = stack.iter().all(|(taking, _)| *taking);
            if let Some(cond) = block.strip_prefix("if ") {
                let value = *conditions
                    .get(cond.trim())
                    .unwrap_or_else(|| panic!("condition `{cond}`"));
                stack.push((outer && value, value));
            } else if block == "else" {
                let (_, taken) = stack.pop().unwrap();
                let outer = stack.iter().all(|(taking, _)| *taking);
                stack.push((outer && !taken, true));
            } else if block == "endif" {
                stack.pop().unwrap();
            } else if let Some(width) = block
                .strip_prefix("filter indent(width=")
                .and_then(|b| b.strip_suffix(", first=False)"))
            {
                filter = Some((out.len(), width.parse().unwrap()));
            } else if block == "endfilter" {
                let (start, width) = filter.take().unwrap();
                let body = out.split_off(start);
                for (i, line) in body.lines().enumerate() {
                    if i > 0 && !line.trim().is_empty() {
                        out.push_str(&" ".repeat(width));
                    }
                    out.push_str(line);
                    out.push('\n');
                }
            } else {
                panic!("block `{block}`");
            }
            continue;
        }
        if !stack.iter().all(|(taking, _)| *taking) {
            continue;
        }
        let mut rendered = line.to_string();
        while let Some(start) = rendered.find("#{") {
            let end = rendered[start..].find("}#").unwrap() + start;
            let expr = rendered[start + 2..end].trim().to_string();
            let value = expressions
                .get(expr.as_str())
                .unwrap_or_else(|| panic!("expression `{expr}`"));
            rendered.replace_range(start..end + 2, value);
        }
        out.push_str(&rendered);
        out.push('\n');
    }
    out
}

/// Every `NAME.j2` under `from`, rendered to `to/NAME` at the same
/// relative path, and every other file copied (makejinja renders
/// `template/config` into the repository); `*.partial.yaml.j2` are left out
/// as its makejinja.toml says.
pub fn render_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().unwrap().is_dir() {
            render_tree(&entry.path(), &to.join(&name));
        } else if name.ends_with(".partial.yaml.j2") {
            continue;
        } else if let Some(stem) = name.strip_suffix(".j2") {
            std::fs::create_dir_all(to).unwrap();
            let text = std::fs::read_to_string(entry.path()).unwrap();
            std::fs::write(to.join(stem), render(&text)).unwrap();
        } else {
            std::fs::create_dir_all(to).unwrap();
            std::fs::copy(entry.path(), to.join(&name)).unwrap();
        }
    }
}
