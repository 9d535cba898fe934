package main

// The AdminService client: the contract compiled from proto/ at start (protocompile), its
// messages built and read through protoreflect (dynamicpb), gRPC over mutual TLS.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bufbuild/protocompile"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

const (
	adminProto   = "nauthera/admin/v1/admin.proto"
	adminService = "/nauthera.admin.v1.AdminService/"
	adminPackage = "nauthera.admin.v1."
)

// adminClient calls the AdminService with messages described by the compiled contract.
type adminClient struct {
	conn  *grpc.ClientConn
	types protoreflect.FileDescriptor
}

func dialAdmin(ctx context.Context, protoRoot, address, serverName, tlsDir string) (*adminClient, error) {
	compiler := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{protoRoot}}),
	}
	files, err := compiler.Compile(ctx, adminProto)
	if err != nil {
		return nil, fmt.Errorf("compiling %s under %s: %w", adminProto, protoRoot, err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(tlsDir, "tls.crt"), filepath.Join(tlsDir, "tls.key"))
	if err != nil {
		return nil, fmt.Errorf("reading the client certificate in %s: %w", tlsDir, err)
	}
	ca, err := os.ReadFile(filepath.Join(tlsDir, "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("reading the CA bundle in %s: %w", tlsDir, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s/ca.crt holds no PEM certificate", tlsDir)
	}
	creds := credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{pair},
		RootCAs:      roots,
		ServerName:   serverName,
		MinVersion:   tls.VersionTLS12,
	})
	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", address, err)
	}
	return &adminClient{conn: conn, types: files[0]}, nil
}

// message is an empty message of the contract's type `name`.
func (a *adminClient) message(name string) *dynamicpb.Message {
	md := a.types.Messages().ByName(protoreflect.Name(name))
	if md == nil {
		panic("the AdminService contract has no message " + name)
	}
	return dynamicpb.NewMessage(md)
}

func (a *adminClient) call(ctx context.Context, method string, request *dynamicpb.Message, response string) (*dynamicpb.Message, error) {
	out := a.message(response)
	if err := a.conn.Invoke(ctx, adminService+method, request, out); err != nil {
		return nil, err
	}
	return out, nil
}

// watch opens WatchChanges from now on; each event is passed to `seen` until the stream ends.
func (a *adminClient) watch(ctx context.Context, seen func(*dynamicpb.Message)) error {
	stream, err := a.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, adminService+"WatchChanges")
	if err != nil {
		return err
	}
	if err := stream.SendMsg(a.message("WatchChangesRequest")); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	for {
		event := a.message("ChangeEvent")
		if err := stream.RecvMsg(event); err != nil {
			return err
		}
		seen(event)
	}
}

// Field access by name on dynamic messages.

func field(m protoreflect.Message, name string) protoreflect.FieldDescriptor {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic(fmt.Sprintf("%s has no field %s", m.Descriptor().FullName(), name))
	}
	return fd
}

func setString(m protoreflect.Message, name, value string) {
	m.Set(field(m, name), protoreflect.ValueOfString(value))
}

func setBool(m protoreflect.Message, name string, value bool) {
	m.Set(field(m, name), protoreflect.ValueOfBool(value))
}

func setInt64(m protoreflect.Message, name string, value int64) {
	m.Set(field(m, name), protoreflect.ValueOfInt64(value))
}

func setStrings(m protoreflect.Message, name string, values []string) {
	list := m.Mutable(field(m, name)).List()
	for _, v := range values {
		list.Append(protoreflect.ValueOfString(v))
	}
}

func child(m protoreflect.Message, name string) protoreflect.Message {
	return m.Mutable(field(m, name)).Message()
}

func getString(m protoreflect.Message, name string) string {
	return m.Get(field(m, name)).String()
}

func getInt64(m protoreflect.Message, name string) int64 {
	return m.Get(field(m, name)).Int()
}

func getStrings(m protoreflect.Message, name string) []string {
	list := m.Get(field(m, name)).List()
	out := make([]string, list.Len())
	for i := range out {
		out[i] = list.Get(i).String()
	}
	return out
}

func getMessage(m protoreflect.Message, name string) protoreflect.Message {
	return m.Get(field(m, name)).Message()
}
