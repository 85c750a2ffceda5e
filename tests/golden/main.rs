//! Translation output against golden files (Istio, Gateway API, Ingress, higress-config) and status from a folder.
//! One test binary for the area (linked once); each module is one former test file.

mod gateway_api_golden;
mod higress_envoyfilters;
mod higress_translate;
mod ingress_golden;
mod status_folder;
mod translate_golden;
