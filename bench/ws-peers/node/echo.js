// Node's `ws` echo server: every message back as it came, text as text.
//
//     node echo.js 19303
const { WebSocketServer } = require('ws');

const port = Number(process.argv[2] || 19303);
const server = new WebSocketServer({ host: '127.0.0.1', port, perMessageDeflate: false });
server.on('connection', (socket) => {
  socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary }));
});
server.on('listening', () => console.log(`listening on ws://127.0.0.1:${port}/`));
