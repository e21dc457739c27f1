# Builds the simpleqd daemon (and the example webhook) into small images.
# The only network it needs is the base images' registry and the Go module
# proxy (go mod download); the build itself then runs offline.
#   docker build --target simpleqd --build-arg VERSION=1.2.3 -t simpleqd .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY client/go.mod client/go.sum ./client/
RUN go mod download
COPY . .
# VERSION names the build in the webhook User-Agent (simpleqd/VERSION).
ARG VERSION=dev
RUN CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath \
      -ldflags "-X github.com/simpleq/simpleqd/internal/daemon.Version=${VERSION}" -o /out/simpleqd ./cmd/simpleqd \
 && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -o /out/webhook ./examples/webhook

# distroless/static: the binary and CA certificates, no shell. It runs as
# distroless' nonroot uid, numeric so Kubernetes' runAsNonRoot can verify it
# (deploy/kubernetes sets the same runAsUser).
FROM gcr.io/distroless/static-debian12 AS simpleqd
COPY --from=build /out/simpleqd /simpleqd
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/simpleqd"]
CMD ["serve", "--config", "/etc/simpleqd/simpleqd.yaml"]

FROM gcr.io/distroless/static-debian12 AS webhook
COPY --from=build /out/webhook /webhook
USER 65532:65532
ENTRYPOINT ["/webhook"]
