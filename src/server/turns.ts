import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Requests a web worker reads in one turn of its event loop before the kept connections of those read after them
 * wait for a later turn (docs/throttling.md "Past capacity: newcomers take turns").
 */
const ANSWERS_PER_TURN = 64;

/**
 * Kept connections take turns. A turn of the event loop reads every connection with a request waiting, so under a
 * crowd of kept connections one turn serves the whole crowd, and a newcomer accepted during it waits for the next
 * turn: its length is the crowd's size. Past `perTurn` requests read in one turn, a kept connection whose answer is
 * written stops being read (its next request waits in the kernel) and joins a queue; at the end of each turn the
 * `perTurn` that waited longest are read again. A connection's first request is never held, so a newcomer is read
 * on the turn after it is accepted, and a turn lasts about `perTurn` requests however large the crowd. Nothing
 * changes while a turn reads fewer.
 */
export function takeTurns(http: Server, onDeferred: () => void, perTurn = ANSWERS_PER_TURN): void {
  const waiting: Socket[] = [];
  let read = 0;
  let scheduled = false;
  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(endOfTurn);
  };
  const endOfTurn = () => {
    scheduled = false;
    read = 0;
    for (let resumed = 0; resumed < perTurn && waiting.length > 0;) {
      const socket = waiting.shift()!;
      if (socket.destroyed) continue;
      socket.resume();
      resumed += 1;
    }
    if (waiting.length > 0) schedule();
  };
  const defer = (socket: Socket) => {
    if (socket.destroyed || socket.writableEnded) return;
    socket.pause();
    waiting.push(socket);
    onDeferred();
  };
  // Counted as requests are read (a counter and a flag per request while turns are short); only a request read
  // past `perTurn` in its turn gets a listener, which holds its connection once the answer is written.
  http.on('request', (req, res) => {
    read += 1;
    schedule();
    if (read > perTurn) res.once('finish', () => defer(req.socket));
  });
}
