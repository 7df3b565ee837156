// Package images owns the tests of OCC's container images, the two
// tarballs scripts/images.sh builds (`make images`, docs/images.md). It
// holds no code: its tests load bin/images/occ.tar and gateway.tar into a
// real Docker engine and run them.
//
// They prove that the occ image runs `occ version` as uid 65532 and holds
// nothing but occ, its users, /tmp and the CA bundle; that neither image
// has a shell; and that the gateway Pod the Kubernetes driver renders
// works in these images without one: its containers, run one after the
// other with `docker run` as the Pod's spec says (command, environment,
// user, read-only root, volumes as bind mounts), copy occ with
// install-self, apply the workspace setup, refuse a foreign marker, and
// start a real OpenClaw gateway that answers /readyz and serves the
// files the setup wrote.
//
// Inputs: OCC_TEST_IMAGES_DIR (the tarballs) and DOCKER_HOST (an engine,
// scripts/testenv/docker.sh), both set by scripts/test.sh. Without them
// the tests skip, except under CI=true, where they fail. Containers use
// --network none, or --network host with the gateway bound to 127.0.0.1;
// never a bridge. Every container carries a label naming its test
// binary: it is removed in t.Cleanup and, should the binary die without
// cleanups, by a guard process that outlives it just long enough.
package images
