//! Chart archives: `pull` writes a real `NAME-VERSION.tgz` (gzip, ustar)
//! holding `NAME/Chart.yaml` and `NAME/values.yaml`, as `helm package`
//! lays a chart out; install and template read `Chart.yaml` back from an
//! archive path. `FAKE_HELM_PULL_DELAY_MS` models the download: charged by
//! `pull`, and by install/template when given a remote chart (helm then
//! downloads it itself).

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

/// Sleeps for the modelled download time of one chart.
pub fn download_delay() {
    let ms = std::env::var("FAKE_HELM_PULL_DELAY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    if ms > 0 {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// Whether `chart_arg` names a chart helm would download: anything that is
/// not a local file or directory.
pub fn is_remote(chart_arg: &str) -> bool {
    !Path::new(chart_arg).exists()
}

/// Writes the archive of chart `name` `version` to `path`.
pub fn write_archive(path: &Path, name: &str, version: &str) -> std::io::Result<()> {
    let chart_yaml = format!(
        "apiVersion: v2\nname: {name}\nversion: {version}\nappVersion: {version}\ndescription: fake-helm's stand-in for {name}\n"
    );
    let mut tar = Vec::new();
    for (file, body) in [("Chart.yaml", chart_yaml.as_str()), ("values.yaml", "{}\n")] {
        tar.extend(header(&format!("{name}/{file}"), body.len()));
        tar.extend(body.as_bytes());
        tar.resize(tar.len().next_multiple_of(512), 0);
    }
    tar.extend([0u8; 1024]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar)?;
    std::fs::write(path, gz.finish()?)
}

/// A ustar header of a regular file.
fn header(name: &str, size: usize) -> [u8; 512] {
    let mut h = [0u8; 512];
    let put = |h: &mut [u8; 512], at: usize, text: &str| {
        h[at..at + text.len()].copy_from_slice(text.as_bytes());
    };
    put(&mut h, 0, name);
    put(&mut h, 100, "0000644\0");
    put(&mut h, 108, "0000000\0");
    put(&mut h, 116, "0000000\0");
    put(&mut h, 124, &format!("{size:011o}\0"));
    put(&mut h, 136, "00000000000\0");
    h[156] = b'0';
    put(&mut h, 257, "ustar\0");
    put(&mut h, 263, "00");
    // The checksum is computed with its own field as spaces.
    h[148..156].fill(b' ');
    let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
    put(&mut h, 148, &format!("{sum:06o}\0 "));
    h
}

/// The top-level `Chart.yaml` of a chart archive, parsed.
pub fn chart_yaml_in_archive(path: &Path) -> Option<Value> {
    let mut tar = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).ok()?)
        .read_to_end(&mut tar)
        .ok()?;
    let mut at = 0;
    while at + 512 <= tar.len() {
        let h = &tar[at..at + 512];
        if h.iter().all(|b| *b == 0) {
            return None;
        }
        let field = |from: usize, to: usize| {
            let raw = &h[from..to];
            let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
            String::from_utf8_lossy(&raw[..end]).trim().to_string()
        };
        let name = match field(345, 500) {
            prefix if prefix.is_empty() => field(0, 100),
            prefix => format!("{prefix}/{}", field(0, 100)),
        };
        let size = usize::from_str_radix(&field(124, 136), 8).ok()?;
        let body = tar.get(at + 512..at + 512 + size)?;
        if name.split('/').count() == 2 && name.ends_with("/Chart.yaml") {
            return serde_saphyr::from_str(&String::from_utf8_lossy(body)).ok();
        }
        at += 512 + size.next_multiple_of(512);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archive_reads_back_and_gnu_tar_agrees() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cilium-1.18.2.tgz");
        write_archive(&path, "cilium", "1.18.2").unwrap();
        let meta = chart_yaml_in_archive(&path).unwrap();
        assert_eq!(meta["name"], "cilium");
        assert_eq!(meta["version"], "1.18.2");
        if let Ok(out) = std::process::Command::new("tar")
            .arg("-tzf")
            .arg(&path)
            .output()
        {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                "cilium/Chart.yaml\ncilium/values.yaml\n"
            );
        }
        assert_eq!(chart_yaml_in_archive(&dir.path().join("missing.tgz")), None);
    }
}
