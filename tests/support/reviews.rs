//! AdmissionReviews of large objects, shared by tests and benchmarks.

/// A CREATE AdmissionReview of a valid VirtualService with `hosts` hosts (about 22 bytes each; 60,000 make 1.3 MB).
pub fn many_hosts_review(hosts: usize) -> Vec<u8> {
    let hosts: Vec<String> = (0..hosts).map(|i| format!("h{i}.example.com")).collect();
    serde_json::to_vec(&serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u1", "operation": "CREATE", "name": "big", "namespace": "default",
            "kind": {"group": "networking.istio.io", "version": "v1", "kind": "VirtualService"},
            "resource": {"group": "networking.istio.io", "version": "v1", "resource": "virtualservices"},
            "userInfo": {"username": "test"},
            "object": {"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
                "metadata": {"name": "big", "namespace": "default"},
                "spec": {"hosts": hosts, "http": [{"route": [{"destination": {"host": "b"}}]}]}}}}))
    .unwrap_or_default()
}
