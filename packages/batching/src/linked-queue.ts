/** A node of a LinkedQueue; kept by whoever needs to remove its value in O(1) later. */
export interface QueueNode<T> {
  readonly value: T;
  prev: QueueNode<T> | undefined;
  next: QueueNode<T> | undefined;
  /** The queue holding the node, undefined once removed. */
  owner: LinkedQueue<T> | undefined;
}

/**
 * A FIFO doubly linked list: O(1) push, shift and removal of any node. Queued jobs leave from
 * the middle when they expire or are cancelled, which an array would make O(n) each.
 */
export class LinkedQueue<T> implements Iterable<T> {
  private head: QueueNode<T> | undefined;
  private tail: QueueNode<T> | undefined;
  private count = 0;

  get size(): number {
    return this.count;
  }

  peek(): T | undefined {
    return this.head?.value;
  }

  push(value: T): QueueNode<T> {
    const node: QueueNode<T> = { value, prev: this.tail, next: undefined, owner: this };
    if (this.tail) this.tail.next = node;
    else this.head = node;
    this.tail = node;
    this.count++;
    return node;
  }

  /** Puts a value ahead of every other: a job handed back to the queue goes first. */
  unshift(value: T): QueueNode<T> {
    const node: QueueNode<T> = { value, prev: undefined, next: this.head, owner: this };
    if (this.head) this.head.prev = node;
    else this.tail = node;
    this.head = node;
    this.count++;
    return node;
  }

  shift(): T | undefined {
    const node = this.head;
    if (!node) return undefined;
    this.remove(node);
    return node.value;
  }

  /** Removes a node of this queue; false when it is not (or no longer) in it. */
  remove(node: QueueNode<T>): boolean {
    if (node.owner !== this) return false;
    if (node.prev) node.prev.next = node.next;
    else this.head = node.next;
    if (node.next) node.next.prev = node.prev;
    else this.tail = node.prev;
    node.prev = undefined;
    node.next = undefined;
    node.owner = undefined;
    this.count--;
    return true;
  }

  *[Symbol.iterator](): Iterator<T> {
    for (let node = this.head; node; node = node.next) yield node.value;
  }
}
