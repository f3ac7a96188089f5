//! Output of many clusters' runs in one stream (docs/fleet.md): each
//! cluster's reporter writes through a [`Tagged`] writer that hands complete
//! lines to the shared stream, so lines of different clusters never mix
//! mid-line. Text lines get the cluster's name in front; JSON Lines get a
//! `cluster` field (unless the event already names it).

use std::io::{self, Write};
use std::sync::{Arc, Mutex};

/// The stream every cluster writes to.
pub type Shared = Arc<Mutex<Box<dyn Write + Send>>>;

pub fn shared(inner: Box<dyn Write + Send>) -> Shared {
    Arc::new(Mutex::new(inner))
}

pub struct Tagged {
    cluster: String,
    /// Width the cluster names are padded to, so text lines align.
    width: usize,
    /// `--output json|yaml`: the lines written are JSON Lines, tagged and
    /// printed as JSON lines or YAML documents.
    structured: Option<crate::output::Format>,
    partial: Vec<u8>,
    out: Shared,
}

impl Tagged {
    pub fn new(
        cluster: &str,
        width: usize,
        structured: Option<crate::output::Format>,
        out: Shared,
    ) -> Tagged {
        Tagged {
            cluster: cluster.to_string(),
            width,
            structured,
            partial: Vec::new(),
            out,
        }
    }

    /// One complete line (without its newline), tagged.
    fn tag(&self, line: &[u8]) -> Vec<u8> {
        let text = String::from_utf8_lossy(line);
        if let Some(format) = self.structured
            && let Ok(serde_json::Value::Object(object)) =
                serde_json::from_str::<serde_json::Value>(&text)
        {
            let mut tagged = serde_json::Map::new();
            if !object.contains_key("cluster") {
                tagged.insert("cluster".into(), self.cluster.clone().into());
            }
            tagged.extend(object);
            return crate::output::event(format, &serde_json::Value::Object(tagged)).into_bytes();
        }
        if self.structured.is_some() || text.trim().is_empty() {
            let mut bytes = line.to_vec();
            bytes.push(b'\n');
            return bytes;
        }
        format!("{:<width$} │ {text}\n", self.cluster, width = self.width).into_bytes()
    }

    fn emit(&self, bytes: &[u8]) -> io::Result<()> {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        out.write_all(bytes)?;
        out.flush()
    }
}

impl Write for Tagged {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.partial.extend_from_slice(buf);
        let mut lines = Vec::new();
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            lines.extend(self.tag(&line[..line.len() - 1]));
        }
        if !lines.is_empty() {
            self.emit(&lines)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Tagged {
    fn drop(&mut self) {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            let _ = self.emit(&self.tag(&line));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn text_lines_carry_the_cluster_and_never_mix() {
        let buffer = Buffer::default();
        let out = shared(Box::new(buffer.clone()));
        let mut infra = Tagged::new("infra", 5, None, out.clone());
        let mut apps = Tagged::new("apps", 5, None, out);
        infra.write_all(b"12:00:01 \xe2\x9c\x93 cil").unwrap();
        apps.write_all(b"12:00:01 \xe2\x9c\x93 coredns installed\n")
            .unwrap();
        infra.write_all(b"ium installed\n\n").unwrap();
        drop(infra);
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text,
            "apps  │ 12:00:01 ✓ coredns installed\ninfra │ 12:00:01 ✓ cilium installed\n\n"
        );
    }

    #[test]
    fn json_lines_get_a_cluster_field_first() {
        let buffer = Buffer::default();
        let out = shared(Box::new(buffer.clone()));
        let mut infra = Tagged::new("infra", 5, Some(crate::output::Format::Json), out);
        infra
            .write_all(b"{\"event\":\"release_finished\",\"release\":\"kube-system/cilium\"}\n{\"event\":\"run_started\",\"cluster\":\"infra\"}\n")
            .unwrap();
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text,
            "{\"cluster\":\"infra\",\"event\":\"release_finished\",\"release\":\"kube-system/cilium\"}\n{\"event\":\"run_started\",\"cluster\":\"infra\"}\n"
        );
    }
}
