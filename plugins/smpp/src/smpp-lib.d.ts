/**
 * The part of node-smpp 0.5 (https://github.com/farhadi/node-smpp) this plugin and its fake SMSC
 * use. The package ships no types. PDU fields are named as in the SMPP specification and are
 * read as `unknown`: the code checks each field's type where it reads it.
 */
declare module 'smpp' {
  import type { EventEmitter } from 'node:events';
  import type { Server as NetServer, Socket } from 'node:net';

  export interface PDU {
    command: string;
    command_id: number;
    command_status: number;
    sequence_number: number;
    isResponse(): boolean;
    /** The response to this request (generic_nack for an unknown command). */
    response(options?: Record<string, unknown>): PDU;
    toBuffer(): Buffer;
    readonly [field: string]: unknown;
  }

  export interface PDUConstructor {
    new (command: string, options?: Record<string, unknown>): PDU;
  }

  export interface Session extends EventEmitter {
    socket: Socket;
    /** false when the socket is no longer writable (nothing was sent). */
    send(pdu: PDU, onResponse?: (resp: PDU) => void, onSent?: (pdu: PDU) => void): boolean;
    close(callback?: () => void): void;
    destroy(callback?: () => void): void;
    pause(): void;
    resume(): void;
  }

  export interface ConnectOptions {
    host: string;
    port: number;
    /** Connect with tls.connect; the other options are passed to it (ca, servername, …). */
    tls?: boolean;
    ca?: string | Buffer | Array<string | Buffer>;
    servername?: string;
    rejectUnauthorized?: boolean;
  }

  export interface Server extends NetServer {
    sessions: Session[];
  }

  export interface ServerOptions {
    key?: string | Buffer;
    cert?: string | Buffer;
  }

  interface Smpp {
    connect(options: ConnectOptions, listener?: () => void): Session;
    createServer(options: ServerOptions, listener: (session: Session) => void): Server;
    PDU: PDUConstructor;
    errors: Record<string, number>;
    /**
     * node-smpp's own text codecs: ASCII is its GSM 03.38 table (data_coding 0), UCS2 is UTF-16BE.
     */
    encodings: Record<
      string,
      { match(text: string): boolean; encode(text: string): Buffer; decode(octets: Buffer): string }
    >;
  }

  const smpp: Smpp;
  export default smpp;
}
