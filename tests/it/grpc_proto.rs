//! wirescope's hand-written BenchmarkService definition against gRPC's own:
//! `tests/fixtures/grpc/bench.protoset` is the descriptor set grpc-go's
//! benchmark server writes (`grpcgo-bench -protoset`, the file ghz loads).
//! Every field wirescope declares must have the same name, number and type,
//! and the service and method paths must be the ones wirescope calls.

use prost::Message;
use prost_types::field_descriptor_proto::Type;
use prost_types::{DescriptorProto, FileDescriptorSet};
use wirescope::traffic::grpc::proto::{SERVICE, STREAMING_PATH, UNARY_PATH};

fn set() -> FileDescriptorSet {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/grpc/bench.protoset"
    ))
    .unwrap();
    FileDescriptorSet::decode(bytes.as_slice()).unwrap()
}

fn message<'a>(set: &'a FileDescriptorSet, name: &str) -> &'a DescriptorProto {
    set.file
        .iter()
        .filter(|f| f.package() == "grpc.testing")
        .flat_map(|f| &f.message_type)
        .find(|m| m.name() == name)
        .unwrap_or_else(|| panic!("grpc.testing.{name} is not in the descriptor set"))
}

fn assert_field(m: &DescriptorProto, name: &str, number: i32, ty: Type) {
    let f = m
        .field
        .iter()
        .find(|f| f.name() == name)
        .unwrap_or_else(|| panic!("{}.{name} missing", m.name()));
    assert_eq!(
        (f.number(), f.r#type()),
        (number, ty),
        "{}.{name}",
        m.name()
    );
}

#[test]
fn declared_fields_match_grpc_testing_messages() {
    let s = set();
    let req = message(&s, "SimpleRequest");
    assert_field(req, "response_type", 1, Type::Enum);
    assert_field(req, "response_size", 2, Type::Int32);
    assert_field(req, "payload", 3, Type::Message);
    assert_field(req, "response_status", 7, Type::Message);
    let resp = message(&s, "SimpleResponse");
    assert_field(resp, "payload", 1, Type::Message);
    let payload = message(&s, "Payload");
    assert_field(payload, "type", 1, Type::Enum);
    assert_field(payload, "body", 2, Type::Bytes);
    let status = message(&s, "EchoStatus");
    assert_field(status, "code", 1, Type::Int32);
    assert_field(status, "message", 2, Type::String);
}

#[test]
fn service_and_methods_are_the_ones_called() {
    let s = set();
    let svc = s
        .file
        .iter()
        .flat_map(|f| f.service.iter().map(move |sv| (f.package(), sv)))
        .find(|(pkg, sv)| format!("{pkg}.{}", sv.name()) == SERVICE)
        .map(|(_, sv)| sv)
        .expect("grpc.testing.BenchmarkService");
    let method = |name: &str| {
        svc.method
            .iter()
            .find(|m| m.name() == name)
            .unwrap_or_else(|| panic!("{name} missing"))
    };
    let unary = method("UnaryCall");
    assert_eq!(UNARY_PATH, format!("/{SERVICE}/UnaryCall"));
    assert_eq!(
        (unary.input_type(), unary.output_type()),
        (
            ".grpc.testing.SimpleRequest",
            ".grpc.testing.SimpleResponse"
        )
    );
    assert!(!unary.client_streaming() && !unary.server_streaming());
    let stream = method("StreamingCall");
    assert_eq!(STREAMING_PATH, format!("/{SERVICE}/StreamingCall"));
    assert!(stream.client_streaming() && stream.server_streaming());
    assert_eq!(stream.input_type(), ".grpc.testing.SimpleRequest");
}
