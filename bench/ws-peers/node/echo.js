// Node's `ws` echo server: every message back as it came, text as text.
// With `deflate` after the port, permessage-deflate is offered with ws'
// defaults (context takeover both ways, zlib's default level, messages
// under 1 KiB sent uncompressed).
//
//     node echo.js 19303 [deflate]
const { WebSocketServer } = require('ws');

const port = Number(process.argv[2] || 19303);
const perMessageDeflate = process.argv[3] === 'deflate';
const server = new WebSocketServer({ host: '127.0.0.1', port, perMessageDeflate });
server.on('connection', (socket) => {
  socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary }));
});
server.on('listening', () => console.log(`listening on ws://127.0.0.1:${port}/`));
