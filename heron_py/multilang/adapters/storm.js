/*
 * heron-py's Node.js adapter for Storm's multilang protocol: the module that shell components
 * written for Apache Storm load with require('./storm').
 *
 * It offers the API of Storm's own storm.js, so those scripts run unchanged:
 *
 *     var storm = require('./storm');
 *     function SplitBolt() { storm.BasicBolt.call(this); }
 *     SplitBolt.prototype = Object.create(storm.BasicBolt.prototype);
 *     SplitBolt.prototype.process = function(tup, done) {
 *         var self = this;
 *         tup.values[0].split(' ').forEach(function(word) {
 *             self.emit({tuple: [word], anchorTupleId: tup.id}, function(taskIds) {});
 *         });
 *         done();
 *     };
 *     new SplitBolt().run();
 *
 * heron-py copies this file beside a script that requires './storm' when the script's folder has
 * no storm.js of its own (a project's own adapter is never replaced).
 *
 * The protocol, over stdin and stdout, each message being JSON followed by a line "end": the
 * engine sends the setup (conf, context, pidDir) and the component answers with its pid once
 * initialize() called its callback; a bolt then reads tuples ("__heartbeat" ones are answered
 * with sync), a spout reads commands (next, ack, fail, activate, deactivate) and answers each
 * with sync when the method handling it calls its callback. An emit is answered with the list of
 * task ids it went to, in the order of the emits, unless it is direct or says
 * need_task_ids: false.
 *
 * Beyond Storm's storm.js: what initialize() logs before calling done() is sent after the pid
 * (the engine reads the pid first); emit() without a callback asks for no task ids; Storm and
 * Bolt (acks and fails are the component's own) are exported too; reportError and rpcMetrics;
 * the default spout methods call their callback (a spout need not define activate or
 * deactivate); a bolt's process() that throws fails its tuple and reports the error;
 * console.log, console.info and console.debug go to stderr (which the engine logs) once a
 * component runs, not into the protocol on stdout; the end of stdin ends the process.
 */

'use strict';

var fs = require('fs');
var path = require('path');
var util = require('util');

var HEARTBEAT_STREAM = '__heartbeat';
var TICK_STREAM = '__tick';
var SYSTEM_TASK = -1;
var END_LINE = 'end';

function Storm() {
    this.separator = '\nend\n';
    this.logLevels = {trace: 0, debug: 1, info: 2, warn: 3, error: 4};
    this.isFirstMessage = true;
    // the callbacks of emits awaiting their task ids, oldest first: the engine answers in order
    this.taskIdsCallbacks = [];
    this.messagePart = '';  // input after the last complete line
    this.messageLines = [];  // the complete lines of the message being read
    // the engine reads the pid first: what initialize() sends before calling done() waits
    this.beforePid = [];
}

Storm.prototype.sendMsgToParent = function(msg) {
    var text = JSON.stringify(msg) + this.separator;
    if (this.beforePid) {
        this.beforePid.push(text);
    } else {
        process.stdout.write(text);
    }
};

Storm.prototype.sync = function() {
    this.sendMsgToParent({command: 'sync'});
};

Storm.prototype.sendPid = function(heartbeatdir) {
    var pid = process.pid;
    // Storm's supervisor finds the subprocesses to kill by these files
    fs.closeSync(fs.openSync(path.join(heartbeatdir, String(pid)), 'w'));
    var waiting = this.beforePid || [];
    this.beforePid = null;
    this.sendMsgToParent({pid: pid});
    waiting.forEach(function(text) {
        process.stdout.write(text);
    });
};

Storm.prototype.sendToLogging = function(args, logLevel) {
    var parts = Array.prototype.map.call(args, function(a) {
        return typeof a === 'string' ? a : JSON.stringify(a);
    });
    this.sendMsgToParent({command: 'log', msg: parts.join(' '), level: logLevel});
};

Storm.prototype.logTrace = function() { this.sendToLogging(arguments, this.logLevels.trace); };
Storm.prototype.logDebug = function() { this.sendToLogging(arguments, this.logLevels.debug); };
Storm.prototype.logInfo = function() { this.sendToLogging(arguments, this.logLevels.info); };
Storm.prototype.logWarn = function() { this.sendToLogging(arguments, this.logLevels.warn); };
Storm.prototype.logError = function() { this.sendToLogging(arguments, this.logLevels.error); };
Storm.prototype.log = Storm.prototype.logInfo;

Storm.prototype.reportError = function(msg) {
    this.sendMsgToParent({command: 'error', msg: String(msg)});
};

/** Updates the engine-side metric registered under name (a ShellBolt subclass's). */
Storm.prototype.rpcMetrics = function(name, params) {
    this.sendMsgToParent({command: 'metrics', name: name, params: params});
};

Storm.prototype.initSetupInfo = function(setupInfo) {
    var self = this;
    this.initialize(setupInfo.conf, setupInfo.context, function() {
        self.sendPid(setupInfo.pidDir);
    });
};

/**
 * Override to set up the component; call done() when finished (the engine waits for it).
 */
Storm.prototype.initialize = function(conf, context, done) {
    done();
};

/**
 * Splits a chunk of input into messages: the text of the lines before each line "end"
 * (a message may span lines; "\r\n" ends a line too). Returns the complete messages' texts.
 */
Storm.prototype.handleNewChunk = function(chunk) {
    var messages = [];
    if (!chunk) {
        return messages;
    }
    var lines = (this.messagePart + chunk).split('\n');
    this.messagePart = lines.pop();
    for (var i = 0; i < lines.length; i++) {
        var line = lines[i];
        if (line.charAt(line.length - 1) === '\r') {
            line = line.slice(0, -1);
        }
        if (line === END_LINE) {
            messages.push(this.messageLines.join('\n'));
            this.messageLines = [];
        } else if (line.length > 0 || this.messageLines.length > 0) {
            this.messageLines.push(line);
        }
    }
    return messages;
};

Storm.prototype.isTaskIds = function(msg) {
    return Array.isArray(msg);
};

Storm.prototype.handleNewMessage = function(text) {
    var msg = JSON.parse(text);
    if (this.isFirstMessage) {
        this.isFirstMessage = false;
        this.initSetupInfo(msg);
    } else if (this.isTaskIds(msg)) {
        this.handleNewTaskId(msg);
    } else {
        this.handleNewCommand(msg);
    }
};

Storm.prototype.handleNewTaskId = function(taskIds) {
    var callback = this.taskIdsCallbacks.shift();
    if (!callback) {
        throw new Error('storm.js: the engine sent task ids ' + JSON.stringify(taskIds) +
                        ' but no emit is waiting for them');
    }
    callback(taskIds);
};

Storm.prototype.handleNewCommand = function(command) {
    throw new Error('storm.js: ' + this.constructor.name + ' got ' + JSON.stringify(command) +
                    '; run a BasicBolt, Bolt or Spout, not Storm itself');
};

/**
 * Emits a tuple. details: {tuple: [values], stream: optional, and for a bolt anchorTupleId (one
 * tuple id or a list), for a spout id (its message id, for ack and fail)}. onTaskIds(taskIds)
 * is called with the task ids the tuple went to; without it no task ids are asked for.
 */
Storm.prototype.emit = function(details, onTaskIds) {
    if (details.task !== undefined && details.task !== null) {
        throw new Error('storm.js: emit() got a task (' + details.task + '); emit to one task with emitDirect()');
    }
    if (onTaskIds) {
        this.taskIdsCallbacks.push(onTaskIds);
    }
    this.__emit(details, Boolean(onTaskIds));
};

/** Emits a tuple to one task: details as emit()'s plus task; no task ids come back. */
Storm.prototype.emitDirect = function(details) {
    if (details.task === undefined || details.task === null) {
        throw new Error('storm.js: emitDirect() needs the task to emit to (details.task)');
    }
    this.__emit(details, false);
};

Storm.prototype.__emitMessage = function(details, needTaskIds) {
    if (!Array.isArray(details.tuple)) {
        throw new Error('storm.js: emit() needs details.tuple, a list of values; found ' +
                        JSON.stringify(details.tuple));
    }
    var message = {command: 'emit', tuple: details.tuple};
    if (details.stream !== undefined && details.stream !== null) {
        message.stream = details.stream;
    }
    if (details.task !== undefined && details.task !== null) {
        message.task = details.task;
    }
    if (!needTaskIds && message.task === undefined) {
        message.need_task_ids = false;
    }
    return message;
};

Storm.prototype.startReadingInput = function() {
    var self = this;
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', function(chunk) {
        self.handleNewChunk(chunk).forEach(function(text) {
            self.handleNewMessage(text);
        });
    });
    // the engine closes stdin to stop the component
    process.stdin.on('end', function() {
        process.exit(0);
    });
};

Storm.prototype.run = function() {
    // stdout carries the protocol alone: what the component's code logs goes to stderr
    var toStderr = function() {
        process.stderr.write(util.format.apply(null, arguments) + '\n');
    };
    console.log = toStderr;
    console.info = toStderr;
    console.debug = toStderr;
    this.startReadingInput();
};

function Tuple(id, component, stream, task, values) {
    this.id = id;
    this.component = component;
    this.stream = stream;
    this.task = task;
    this.values = values;
}

Tuple.prototype.isTickTuple = function() {
    return this.task === SYSTEM_TASK && this.stream === TICK_STREAM;
};

Tuple.prototype.isHeartbeatTuple = function() {
    return this.task === SYSTEM_TASK && this.stream === HEARTBEAT_STREAM;
};

function anchorsOf(details) {
    var a = details.anchorTupleId;
    if (a === undefined || a === null) {
        return [];
    }
    return Array.isArray(a) ? a : [a];
}

function tupleOf(command) {
    return new Tuple(command.id, command.comp, command.stream, command.task, command.tuple);
}

/**
 * A bolt: override process(tuple, done) and call done() when the tuple is handled (it is then
 * acked) or done(err) (it is failed). Emits are anchored to anchorTupleId.
 */
function BasicBolt() {
    Storm.call(this);
    this.anchorTuple = null;
}

BasicBolt.prototype = Object.create(Storm.prototype);
BasicBolt.prototype.constructor = BasicBolt;

BasicBolt.prototype.__emit = function(details, needTaskIds) {
    var message = this.__emitMessage(details, needTaskIds);
    message.anchors = anchorsOf(details);
    this.sendMsgToParent(message);
};

BasicBolt.prototype.handleNewCommand = function(command) {
    var self = this;
    var tup = tupleOf(command);
    if (tup.isHeartbeatTuple()) {
        this.sync();
        return;
    }
    var settled = false;
    var done = function(err) {
        if (settled) {
            return;
        }
        settled = true;
        if (err) {
            self.fail(tup, err);
        } else {
            self.ack(tup);
        }
    };
    try {
        this.process(tup, done);
    } catch (err) {
        this.reportError(err && err.stack ? err.stack : String(err));
        done(err || new Error('process() threw ' + String(err)));
    }
};

BasicBolt.prototype.process = function(tuple, done) {
    done();
};

BasicBolt.prototype.ack = function(tup) {
    this.sendMsgToParent({command: 'ack', id: tup.id});
};

BasicBolt.prototype.fail = function(tup, err) {
    this.sendMsgToParent({command: 'fail', id: tup.id});
};

/**
 * A bolt that acks and fails its tuples itself: override process(tuple) and call
 * this.ack(tuple) or this.fail(tuple).
 */
function Bolt() {
    BasicBolt.call(this);
}

Bolt.prototype = Object.create(BasicBolt.prototype);
Bolt.prototype.constructor = Bolt;

Bolt.prototype.handleNewCommand = function(command) {
    var tup = tupleOf(command);
    if (tup.isHeartbeatTuple()) {
        this.sync();
        return;
    }
    this.process(tup);
};

Bolt.prototype.process = function(tuple) {};

/**
 * A spout: override nextTuple(done) (and ack(id, done), fail(id, done), activate(done),
 * deactivate(done) as needed); each must call done() when finished: the engine waits for it
 * before its next command.
 */
function Spout() {
    Storm.call(this);
}

Spout.prototype = Object.create(Storm.prototype);
Spout.prototype.constructor = Spout;

Spout.prototype.activate = function(done) { done(); };
Spout.prototype.deactivate = function(done) { done(); };
Spout.prototype.ack = function(id, done) { done(); };
Spout.prototype.fail = function(id, done) { done(); };
Spout.prototype.nextTuple = function(done) { done(); };

Spout.prototype.handleNewCommand = function(command) {
    var self = this;
    var done = function() {
        self.sync();
    };
    switch (command.command) {
        case 'next': this.nextTuple(done); break;
        case 'ack': this.ack(command.id, done); break;
        case 'fail': this.fail(command.id, done); break;
        case 'activate': this.activate(done); break;
        case 'deactivate': this.deactivate(done); break;
        default: done();
    }
};

Spout.prototype.__emit = function(details, needTaskIds) {
    var message = this.__emitMessage(details, needTaskIds);
    if (details.id !== undefined && details.id !== null) {
        message.id = details.id;
    }
    this.sendMsgToParent(message);
};

module.exports.Storm = Storm;
module.exports.BasicBolt = BasicBolt;
module.exports.Bolt = Bolt;
module.exports.Spout = Spout;
module.exports.Tuple = Tuple;
