//! Captures `tracing` output of the current thread into a buffer (use with current-thread Tokio tests).

use std::io::Write;
use std::sync::{Arc, Mutex};

use tracing::subscriber::DefaultGuard;

/// Log capture; the subscriber stays installed on this thread while the value lives.
pub struct CapturedLogs {
    buffer: Arc<Mutex<Vec<u8>>>,
    _guard: DefaultGuard,
}

#[derive(Clone)]
struct Writer(Arc<Mutex<Vec<u8>>>);

impl Write for Writer {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedLogs {
    /// Installs a plain-text subscriber (no colours) writing into a buffer.
    pub fn install() -> Self {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = Writer(buffer.clone());
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(move || writer.clone())
            .finish();
        CapturedLogs {
            buffer,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    /// Returns everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.buffer.lock().unwrap()).into_owned()
    }
}
