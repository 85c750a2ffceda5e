//! WebSocket on both ends of a gateway, for the tests (RFC 6455, written here: text frames of up to 125 bytes are
//! all they need): a backend on 127.0.0.1 that completes the opening handshake (`Sec-WebSocket-Accept` from the
//! client's key) and answers each text frame with `echo: <text>`, and a client that opens a WebSocket through a
//! gateway and sends one message.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use base64::Engine as _;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The GUID a server appends to the client's key (RFC 6455 §1.3).
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// A WebSocket echo backend on 127.0.0.1; stops when dropped.
pub struct WebSocketEcho {
    /// Its port.
    pub port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WebSocketEcho {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl WebSocketEcho {
    /// Starts the backend.
    pub async fn start() -> WebSocketEcho {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream));
            }
        });
        WebSocketEcho { port, task }
    }
}

/// The `Sec-WebSocket-Accept` for a client's `Sec-WebSocket-Key`.
fn accept_key(key: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{key}{GUID}").as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

/// Reads an HTTP head (up to the blank line).
async fn read_head(stream: &mut (impl AsyncRead + Unpin)) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
        if stream.read_exact(&mut byte).await.is_err() {
            break;
        }
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// The value of header `name` in an HTTP head.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

async fn serve(mut stream: TcpStream) {
    let head = read_head(&mut stream).await;
    let Some(key) = header(&head, "sec-websocket-key") else {
        let _ = stream
            .write_all(b"HTTP/1.1 426 Upgrade Required\r\ncontent-length: 0\r\n\r\n")
            .await;
        return;
    };
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        accept_key(key)
    );
    if stream.write_all(response.as_bytes()).await.is_err() {
        return;
    }
    while let Some(text) = read_frame(&mut stream).await {
        if write_frame(&mut stream, &format!("echo: {text}"), None)
            .await
            .is_err()
        {
            return;
        }
    }
}

/// Reads one text frame (payload up to 125 bytes, masked or not); `None` at the end or for anything else.
async fn read_frame(stream: &mut (impl AsyncRead + Unpin)) -> Option<String> {
    let mut head = [0u8; 2];
    stream.read_exact(&mut head).await.ok()?;
    if head[0] & 0x0f != 1 {
        return None;
    }
    let masked = head[1] & 0x80 != 0;
    let len = usize::from(head[1] & 0x7f);
    if len > 125 {
        return None;
    }
    let mut mask = [0u8; 4];
    if masked {
        stream.read_exact(&mut mask).await.ok()?;
    }
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).await.ok()?;
    if masked {
        for (i, byte) in payload.iter_mut().enumerate() {
            *byte ^= mask[i % 4];
        }
    }
    String::from_utf8(payload).ok()
}

/// Writes one final text frame of `text` (up to 125 bytes), masked with `mask` (a client's frames must be).
async fn write_frame(
    stream: &mut (impl AsyncWrite + Unpin),
    text: &str,
    mask: Option<[u8; 4]>,
) -> std::io::Result<()> {
    let payload = text.as_bytes();
    let len = u8::try_from(payload.len()).unwrap();
    assert!(len <= 125);
    let mut frame = vec![0x81, len | if mask.is_some() { 0x80 } else { 0 }];
    match mask {
        Some(mask) => {
            frame.extend_from_slice(&mask);
            frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        }
        None => frame.extend_from_slice(payload),
    }
    stream.write_all(&frame).await
}

/// Opens a WebSocket to `path` with Host `host` through 127.0.0.1:`port`, sends `message` and returns the status
/// line of the handshake's answer and the first message back (`None` when the upgrade did not happen).
pub async fn exchange(
    port: u16,
    host: &str,
    path: &str,
    message: &str,
) -> (String, Option<String>) {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)).await else {
        return (String::new(), None);
    };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).await.is_err() {
        return (String::new(), None);
    }
    let head = read_head(&mut stream).await;
    let status = head.lines().next().unwrap_or_default().to_string();
    let accepted = status.contains(" 101 ")
        && header(&head, "sec-websocket-accept")
            == Some(accept_key("dGhlIHNhbXBsZSBub25jZQ==").as_str());
    if !accepted {
        return (status, None);
    }
    if write_frame(&mut stream, message, Some([1, 2, 3, 4]))
        .await
        .is_err()
    {
        return (status, None);
    }
    let reply = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut stream))
        .await
        .ok()
        .flatten();
    (status, reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accept_key_is_rfc_6455s() {
        // RFC 6455 §1.3's example.
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }
}
