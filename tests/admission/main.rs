//! The admission webhook: AdmissionReview over HTTPS, its limits, the references it checks and the CLI that serves it.
//! One test binary for the area (linked once); each module is one former test file.

mod admission_cli;
mod admission_https;
mod admission_limits;
mod admission_proptest;
mod admission_references;
mod admission_review;
