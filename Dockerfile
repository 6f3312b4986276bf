# Skali Studio: a static binary in a small runtime image. The image runs no
# database of its own: give it DATABASE_URL and STUDIO_SECRET_KEY.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/studio ./cmd/studio && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/studio /usr/local/bin/studio
COPY --from=build --chown=65532:65532 /out/data /var/lib/studio
ENV STUDIO_ADDR=0.0.0.0:8080 \
    STUDIO_DATA_DIR=/var/lib/studio \
    STUDIO_LOG_FORMAT=json
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/studio"]
CMD ["serve"]
