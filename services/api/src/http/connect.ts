import http from 'node:http';
import type { Duplex } from 'node:stream';

type Handler = (request: http.IncomingMessage, response: http.ServerResponse) => void;

/**
 * Node hands CONNECT requests to the server's 'connect' event and, with no listener,
 * drops the connection without an answer. The API is no proxy: a CONNECT goes through
 * the app like any other request (so its path gets a JSON 405 with `Allow`, or a 404),
 * on a response bound to the raw socket, which is closed once the answer is sent.
 */
export function answerConnectWithApp(server: http.Server, handler: Handler): void {
  server.on('connect', (request: http.IncomingMessage, socket: Duplex) => {
    socket.on('error', () => socket.destroy());
    const response = new http.ServerResponse(request);
    response.shouldKeepAlive = false;
    response.assignSocket(socket as unknown as import('node:net').Socket);
    response.on('finish', () => {
      response.detachSocket(socket as unknown as import('node:net').Socket);
      socket.end();
    });
    handler(request, response);
  });
}
