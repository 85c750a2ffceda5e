//! gRPC wire layer of the ADS service: takes HTTP/2 requests for the two ADS methods, decodes their request
//! streams and yields response bodies built from pre-encoded messages ([`WireMessage`]) whose large resources
//! are the proxy group's shared encoded bytes, so no stream copies or re-encodes them and an idle stream keeps
//! no encode buffer.
//!
//! Why not tonic's codec: it encodes every response per stream into an encode buffer that stays grown to the
//! largest message the stream sent (~60 KB for a 1,000-route RouteConfiguration) while the stream idles, and it
//! re-encodes resources every proxy of a group shares. Writing the shared bytes here instead took 10,000 idle
//! streams from 931 MiB to 385 MiB RSS for SotW (94.9 to 39.0 KiB per stream) and from 1,143 MiB to 529 MiB for
//! Delta (116.5 to 53.7 KiB), and server CPU per change with 1,000 clients from 135 to 88 ms (SotW) and 93 to
//! 84 ms (Delta) (BENCHMARKS.md, the xDS table of 2026-11-22; commit 50e21ae).

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use hyper::body::{Body as HttpBody, Frame};
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, key_len, WireType};
use prost::Message;
use tokio_stream::Stream;
use tonic::body::Body;
use tonic::Status;

use super::connection::{limit_hit, Limit};
use super::metrics::XdsMetrics;

/// Resources at least this large are sent as their shared bytes (no copy); smaller ones are copied into the
/// stream's message, which is cheaper than an extra HTTP/2 DATA frame.
const SHARE_THRESHOLD: usize = 1024;

/// One complete gRPC message (length prefix included), as a list of chunks sent in order.
#[derive(Debug, Default)]
pub(crate) struct WireMessage {
    chunks: Vec<Bytes>,
}

impl WireMessage {
    /// Total length on the wire (prefix included).
    pub(crate) fn len(&self) -> usize {
        self.chunks.iter().map(Bytes::len).sum()
    }

    /// The chunks to send, in order.
    pub(crate) fn into_chunks(self) -> Vec<Bytes> {
        self.chunks
    }

    /// The message as one contiguous buffer (tests decode it with prost).
    #[cfg(test)]
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        self.chunks.concat()
    }
}

/// Encodes one gRPC message: the fields of `header` (any prost message), then one length-delimited field
/// `tag` per entry of `fields`, holding the entry's small per-stream `head` followed by its `shared` bytes (the
/// group's encoded resource). Shared bytes of at least [`SHARE_THRESHOLD`] are sent as they are; everything
/// else goes into one buffer sized exactly, with the 5-byte gRPC prefix first, so no pass is made twice.
pub(crate) fn encode_message(
    header: &impl Message,
    tag: u32,
    fields: &[(&[u8], &Bytes)],
) -> WireMessage {
    let len = header.encoded_len()
        + fields
            .iter()
            .map(|(head, shared)| field_len(tag, head.len() + shared.len()))
            .sum::<usize>();
    let by_reference: usize = fields
        .iter()
        .map(|(_, shared)| shared.len())
        .filter(|len| *len >= SHARE_THRESHOLD)
        .sum();
    let mut buf = BytesMut::with_capacity(5 + len - by_reference);
    buf.put_u8(0); // not compressed
    buf.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    header.encode_raw(&mut buf);
    let mut chunks = Vec::new();
    for (head, shared) in fields {
        encode_key(tag, WireType::LengthDelimited, &mut buf);
        encode_varint((head.len() + shared.len()) as u64, &mut buf);
        buf.put_slice(head);
        if shared.len() >= SHARE_THRESHOLD {
            if !buf.is_empty() {
                chunks.push(buf.split().freeze());
            }
            chunks.push((*shared).clone());
        } else {
            buf.put_slice(shared);
        }
    }
    if !buf.is_empty() {
        chunks.push(buf.freeze());
    }
    WireMessage { chunks }
}

/// Encoded length of field `tag` holding `len` bytes.
fn field_len(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

/// The trailers frame that ends a call with `status`.
pub(crate) fn trailers(status: &Status) -> Frame<Bytes> {
    let mut headers = HeaderMap::new();
    if status.add_header(&mut headers).is_err() {
        // Only a status whose message cannot be a header value gets here; the code alone still ends the call.
        headers.insert("grpc-status", HeaderValue::from(status.code() as i32));
    }
    Frame::trailers(headers)
}

/// The gRPC response of an ADS call whose messages and trailers `body` yields.
pub(crate) fn response(
    body: impl HttpBody<Data = Bytes, Error = Status> + Send + 'static,
) -> hyper::Response<Body> {
    let mut response = hyper::Response::new(Body::new(body));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    response
}

/// The request messages of one ADS call, decoded straight from the HTTP/2 DATA frames. A message that arrives
/// whole in one frame (the usual case) is decoded where it lies; only a message split over frames is gathered,
/// and that buffer is let go once it is decoded, so an idle stream keeps no decode buffer.
pub(crate) struct Requests<T> {
    body: Body,
    /// Bytes of an incomplete message (prefix included).
    partial: BytesMut,
    /// How much of `budget` `partial` holds.
    reserved: usize,
    /// Frames not yet decoded.
    frame: Bytes,
    max_message_size: usize,
    budget: RequestBudget,
    ended: bool,
    message: PhantomData<fn() -> T>,
}

/// The bytes of unfinished requests every stream together may hold, shared by the streams of a server; counts
/// the request limits that bite.
#[derive(Debug, Clone)]
pub(crate) struct RequestBudget {
    limit: usize,
    used: Arc<AtomicUsize>,
    metrics: XdsMetrics,
}

impl RequestBudget {
    /// A budget of `limit` bytes.
    pub(crate) fn new(limit: usize, metrics: XdsMetrics) -> Self {
        RequestBudget {
            limit,
            used: Arc::new(AtomicUsize::new(0)),
            metrics,
        }
    }

    /// Bytes held now.
    #[cfg(test)]
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    fn take(&self, bytes: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.limit)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// The request stream of an ADS call; messages over `max_message_size` bytes end it with an error, and so does a
/// split message that `budget` has no room left for.
pub(crate) fn requests<T>(
    request: hyper::Request<Body>,
    max_message_size: usize,
    budget: RequestBudget,
) -> Requests<T> {
    Requests {
        body: request.into_body(),
        partial: BytesMut::new(),
        reserved: 0,
        frame: Bytes::new(),
        max_message_size,
        budget,
        ended: false,
        message: PhantomData,
    }
}

impl<T> Drop for Requests<T> {
    fn drop(&mut self) {
        self.budget.give_back(self.reserved);
    }
}

fn decode<T: Message + Default>(bytes: &[u8]) -> Result<T, Status> {
    T::decode(bytes)
        .map_err(|error| Status::invalid_argument(format!("malformed xDS request: {error}")))
}

impl<T> Requests<T> {
    /// Length of the gRPC message at the start of `buf` (prefix excluded), once its prefix is there.
    fn message_len(&self, buf: &[u8]) -> Result<Option<usize>, Status> {
        let Some(prefix) = buf.get(..5) else {
            return Ok(None);
        };
        if prefix[0] != 0 {
            return Err(Status::unimplemented(
                "compressed xDS requests are not supported",
            ));
        }
        let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
        let max = self.max_message_size;
        if len > max {
            limit_hit(
                &self.budget.metrics,
                Limit::RequestSize,
                format_args!("ending an xDS stream: a request of {len} bytes exceeds the limit of {max} bytes"),
            );
            return Err(Status::resource_exhausted(format!(
                "xDS request of {len} bytes exceeds the limit of {max} bytes"
            )));
        }
        Ok(Some(len))
    }

    /// Accounts for what `partial` holds now against the shared budget.
    fn reserve(&mut self) -> Result<(), Status> {
        let held = self.partial.capacity();
        if held <= self.reserved {
            return Ok(());
        }
        if !self.budget.take(held - self.reserved) {
            let limit = self.budget.limit;
            limit_hit(
                &self.budget.metrics,
                Limit::BufferedRequests,
                format_args!(
                    "ending an xDS stream: unfinished requests of all streams already hold {limit} bytes"
                ),
            );
            return Err(Status::resource_exhausted(
                "the server holds too many unfinished xDS requests; send the message again later",
            ));
        }
        self.reserved = held;
        Ok(())
    }

    /// Lets go of the gather buffer and its share of the budget.
    fn release(&mut self) {
        self.partial = BytesMut::new();
        self.budget.give_back(std::mem::take(&mut self.reserved));
    }
}

impl<T: Message + Default> Requests<T> {
    /// The next whole message from what has arrived, if there is one.
    fn next_buffered(&mut self) -> Result<Option<T>, Status> {
        if self.partial.is_empty() {
            // Decode in place when the frame holds the whole message.
            if let Some(len) = self.message_len(&self.frame)? {
                if self.frame.len() >= 5 + len {
                    let message = decode(&self.frame[5..5 + len])?;
                    self.frame.advance(5 + len);
                    return Ok(Some(message));
                }
            }
        }
        // Gather the rest of a split message.
        self.partial.extend_from_slice(&self.frame);
        self.frame = Bytes::new();
        let Some(len) = self.message_len(&self.partial)? else {
            return self.reserve().map(|()| None);
        };
        if self.partial.len() < 5 + len {
            return self.reserve().map(|()| None);
        }
        let message = decode(&self.partial[5..5 + len])?;
        self.frame = self.partial.split_off(5 + len).freeze();
        self.release();
        Ok(Some(message))
    }
}

impl<T: Message + Default> Stream for Requests<T> {
    type Item = Result<T, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            match this.next_buffered() {
                Ok(Some(message)) => {
                    if this.frame.is_empty() {
                        // Even empty, the rest of a frame or of a gathered message shares (and keeps alive)
                        // the whole buffer it was cut from: HTTP/2's read buffer, or the gather buffer.
                        this.frame = Bytes::new();
                    }
                    return Poll::Ready(Some(Ok(message)));
                }
                Ok(None) => {}
                Err(status) => {
                    // Nothing after a bad message is read.
                    this.ended = true;
                    this.frame = Bytes::new();
                    this.release();
                    return Poll::Ready(Some(Err(status)));
                }
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    this.ended = true;
                    if !this.partial.is_empty() || !this.frame.is_empty() {
                        this.release();
                        this.frame = Bytes::new();
                        return Poll::Ready(Some(Err(Status::invalid_argument(
                            "xDS request stream ended inside a message",
                        ))));
                    }
                    return Poll::Ready(None);
                }
                Poll::Ready(Some(Err(status))) => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(status)));
                }
                Poll::Ready(Some(Ok(frame))) => {
                    // Trailers carry nothing a request stream needs.
                    if let Ok(data) = frame.into_data() {
                        this.frame = data;
                    }
                }
            }
        }
    }
}

/// The answer to a call of a method this service does not have.
pub(crate) fn unimplemented(path: &str) -> Ready<Result<hyper::Response<Body>, Infallible>> {
    ready(Ok(
        Status::unimplemented(format!("no such method: {path}")).into_http()
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
    use futures::StreamExt;

    use super::*;

    /// A request body that yields the given DATA frames, then ends.
    struct Frames(VecDeque<Bytes>);

    impl HttpBody for Frames {
        type Data = Bytes;
        type Error = Status;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
            Poll::Ready(self.0.pop_front().map(|data| Ok(Frame::data(data))))
        }
    }

    fn framed(type_url: &str) -> Vec<u8> {
        let message = DiscoveryRequest {
            type_url: type_url.into(),
            ..Default::default()
        }
        .encode_to_vec();
        let mut out = vec![0];
        out.extend_from_slice(&(message.len() as u32).to_be_bytes());
        out.extend_from_slice(&message);
        out
    }

    async fn decode_all(frames: Vec<Vec<u8>>, max: usize) -> Vec<Result<String, Status>> {
        let budget = RequestBudget::new(1 << 20, XdsMetrics::default());
        decode_within(frames, max, &budget).await
    }

    async fn decode_within(
        frames: Vec<Vec<u8>>,
        max: usize,
        budget: &RequestBudget,
    ) -> Vec<Result<String, Status>> {
        let body = Body::new(Frames(frames.into_iter().map(Bytes::from).collect()));
        requests::<DiscoveryRequest>(hyper::Request::new(body), max, budget.clone())
            .map(|r| r.map(|request| request.type_url))
            .collect()
            .await
    }

    /// Split messages draw on the server-wide budget while they are gathered, and give it back.
    #[tokio::test]
    async fn gathering_split_messages_is_bounded_by_the_shared_budget() {
        let metrics = XdsMetrics::default();
        let budget = RequestBudget::new(32, metrics.clone());
        let big = framed(&"x".repeat(100));
        // Past 32 bytes of an unfinished message, the budget is spent (a message completed by the frame that
        // brings its end is decoded at once and holds nothing).
        let frames = vec![big[..10].to_vec(), big[10..50].to_vec(), big[50..].to_vec()];
        let results = decode_within(frames, 1024, &budget).await;
        assert_eq!(
            results[0].as_ref().unwrap_err().code(),
            tonic::Code::ResourceExhausted
        );
        assert_eq!(metrics.limit_count("buffered_requests"), 1);
        assert_eq!(budget.used(), 0);
        let small = framed("a");
        let (head, tail) = small.split_at(3);
        let results = decode_within(vec![head.to_vec(), tail.to_vec()], 1024, &budget).await;
        assert_eq!(results.len(), 1);
        assert!(results[0].is_ok());
        assert_eq!(budget.used(), 0);
    }

    #[tokio::test]
    async fn messages_whole_split_and_several_per_frame_are_decoded() {
        let (a, b, c) = (framed("a"), framed("b"), framed("c"));
        let together = [a.clone(), b.clone()].concat();
        let frames = vec![
            together,
            c[..3].to_vec(),
            c[3..7].to_vec(),
            [&c[7..], &a[..]].concat(),
        ];
        let types: Vec<String> = decode_all(frames, 1024)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(types, ["a", "b", "c", "a"]);
    }

    #[tokio::test]
    async fn bad_frames_end_the_stream_with_an_error() {
        let big = framed(&"x".repeat(100));
        let error = decode_all(vec![big], 50).await.remove(0).unwrap_err();
        assert_eq!(error.code(), tonic::Code::ResourceExhausted);

        let mut compressed = framed("a");
        compressed[0] = 1;
        let error = decode_all(vec![compressed], 1024)
            .await
            .remove(0)
            .unwrap_err();
        assert_eq!(error.code(), tonic::Code::Unimplemented);

        let cut = framed("a")[..6].to_vec();
        let results = decode_all(vec![cut], 1024).await;
        assert_eq!(results.len(), 1);
        assert_eq!(
            results[0].as_ref().unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }
}
