# Builds the simpleqd daemon (and the example webhook) into small images.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/simpleqd ./cmd/simpleqd \
 && CGO_ENABLED=0 go build -trimpath -o /out/webhook ./examples/webhook

FROM gcr.io/distroless/static-debian12 AS simpleqd
COPY --from=build /out/simpleqd /simpleqd
ENTRYPOINT ["/simpleqd"]
CMD ["serve", "--config", "/etc/simpleqd/simpleqd.yaml"]

FROM gcr.io/distroless/static-debian12 AS webhook
COPY --from=build /out/webhook /webhook
ENTRYPOINT ["/webhook"]
