//! gRPC wire layer of the ADS service: takes HTTP/2 requests for the two ADS methods, decodes their request
//! streams and yields response bodies built from pre-encoded messages ([`WireMessage`]) whose large resources
//! are the proxy group's shared encoded bytes, so no stream copies or re-encodes them and an idle stream keeps
//! no encode buffer.

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::marker::PhantomData;

use bytes::{BufMut, Bytes, BytesMut};
use hyper::body::{Body as HttpBody, Frame};
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, key_len, WireType};
use prost::Message;
use tonic::body::Body;
use tonic::codec::{BufferSettings, DecodeBuf, Decoder, Streaming};
use tonic::Status;

/// Resources at least this large are sent as their shared bytes (no copy); smaller ones are copied into the
/// stream's message, which is cheaper than an extra HTTP/2 DATA frame.
const SHARE_THRESHOLD: usize = 1024;

/// Initial request decode buffer per stream (tonic's default is 8 KiB); it grows for larger requests.
const DECODE_BUFFER: usize = 1024;

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

/// Decodes requests of type `T` with a small initial buffer.
pub(crate) struct RequestDecoder<T>(PhantomData<fn() -> T>);

impl<T> Default for RequestDecoder<T> {
    fn default() -> Self {
        RequestDecoder(PhantomData)
    }
}

impl<T: Message + Default + 'static> Decoder for RequestDecoder<T> {
    type Item = T;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<T>, Status> {
        T::decode(buf)
            .map(Some)
            .map_err(|error| Status::invalid_argument(format!("malformed xDS request: {error}")))
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(DECODE_BUFFER, DECODE_BUFFER)
    }
}

/// The request stream of an ADS call.
pub(crate) fn requests<T: Message + Default + Send + 'static>(
    request: hyper::Request<Body>,
    max_message_size: usize,
) -> Streaming<T> {
    Streaming::new_request(
        RequestDecoder::<T>::default(),
        request.into_body(),
        None,
        Some(max_message_size),
    )
}

/// The answer to a call of a method this service does not have.
pub(crate) fn unimplemented(path: &str) -> Ready<Result<hyper::Response<Body>, Infallible>> {
    ready(Ok(
        Status::unimplemented(format!("no such method: {path}")).into_http()
    ))
}
